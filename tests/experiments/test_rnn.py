"""The RNN experiment on tiny sizes: the marked-recall data, the models, the timing sweep and the pipeline."""

import json
import os

import pytest
import torch

from attnkit.experiments import rnn as R

TINY = R.RnnConfig(lengths=(4, 8), seeds=2, d_model=8, steps=3, batch_size=4, test_sequences=20,
                   timing_steps=1, timing_lengths=(4, 8, 16))


def test_recall_batch_marks_the_first_token_and_asks_for_it():
    (x, marks), y = R.recall_batch(5, 7, 16, torch.Generator().manual_seed(0))
    assert x.shape == marks.shape == (5, 7) and y.tolist() == x[:, 0].tolist()
    assert marks[:, 0].tolist() == [1] * 5 and int(marks[:, 1:].sum()) == 0 and 0 <= int(x.min()) < int(x.max()) < 16


def test_models_read_the_answer_at_the_last_position():
    cfg = R.RnnConfig(d_model=8)
    (x, marks), _ = R.recall_batch(2, 6, 16, torch.Generator().manual_seed(0))
    for name in R.MODELS:
        model = R.build_model(cfg, name, 6).eval()
        out = model(x, marks)
        assert out.shape == (2, 16)
        if name != "self-attention":  # the RNN's last output depends on nothing after it: change the first token
            x2 = x.clone()
            x2[:, 0] = (x2[:, 0] + 1) % 16
            assert not torch.allclose(model(x2, marks), out)
    lstm = R.build_model(cfg, "lstm", 6).rnn
    assert lstm.bias_ih_l0[8:16].tolist() == [1.0] * 8 and lstm.bias_hh_l0[8:16].tolist() == [0.0] * 8
    assert isinstance(R.build_model(cfg, "gru", 6).rnn, torch.nn.GRU)
    with pytest.raises(ValueError, match="`name` must be one of"):
        R.build_model(cfg, "transformer-xl", 6)


def test_config_refuses_bad_values():
    with pytest.raises(ValueError, match="lengths"):
        R.RnnConfig(lengths=(1, 16))
    with pytest.raises(ValueError, match="models"):
        R.RnnConfig(models=("gru", "mamba"))
    with pytest.raises(ValueError, match="steps"):
        R.RnnConfig(steps=0)
    with pytest.raises(ValueError, match="timing_lengths"):
        R.RnnConfig(timing_lengths=())


def test_pipeline_rows_timing_table_figure(tmp_path, one_thread):
    res = R.run(tmp_path, TINY, command="attnkit experiment rnn --quick", log=lambda s: None)
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * 2 * 2 and {r["x"] for r in rows} == {4, 8}
    assert all(0 <= r["test_accuracy"] <= 1 and r["step_ms_median"] > 0 and r["steps"] == 3 for r in rows)
    timing = [json.loads(x) for x in (tmp_path / "timing.jsonl").read_text().splitlines()]
    threads = sorted({1, os.cpu_count()})
    assert len(timing) == 3 * 3 * len(threads) and all(t["step_ms"] > 0 for t in timing)
    assert {t["x"] for t in timing} == {4, 8, 16}  # the sweep's own lengths, past the trained ones
    md = (tmp_path / "rnn.md").read_text()
    assert "| L | GRU | LSTM | self-attention |" in md and "## Time per training step" in md
    assert "forget-gate bias starts at 1" in md
    assert any(v.startswith("- self-attention: ") and "ms per training step at L = 16" in v for v in res["verdict"])
    assert (tmp_path / "rnn.png").stat().st_size > 20_000


def test_verdict_names_where_each_model_fails():
    summary = [{"model": m, "x": n, "mean": a, "std": 0.0} for m, n, a in
               [("gru", 16, 1.0), ("gru", 64, 0.95), ("gru", 256, 0.07), ("self-attention", 16, 1.0),
                ("self-attention", 256, 0.99)]]
    timing = [{"model": m, "x": n, "threads": th, "step_ms": ms} for m, n, th, ms in
              [("gru", 16, 1, 2.0), ("gru", 64, 1, 8.0), ("gru", 256, 1, 32.0),
               ("gru", 16, 2, 2.0), ("gru", 64, 2, 8.0), ("gru", 256, 2, 32.0)]]
    lines = R.verdict(summary, timing, R.RnnConfig(models=("gru", "self-attention")))
    assert lines[0] == ("- GRU: recalls (>= 90%) up to L = 64, near chance (< 12%) from L = 256; "
                        "100.0% at 16, 95.0% at 64, 7.0% at 256.")
    assert lines[1].startswith("- self-attention: recalls (>= 90%) up to L = 256, above 12% at every length")
    assert lines[2] == ("- GRU: 32.0 ms per training step at L = 256 (2 threads), 1.00x faster on 2 threads than "
                        "on 1; time grows like L^1.00.")
