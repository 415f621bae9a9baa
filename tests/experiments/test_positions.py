"""The positions experiment on tiny sizes: the previous-token data, one model per encoding, the learned table's
refusal past its rows, and the pipeline."""

import json

import pytest
import torch

from attnkit.experiments import positions as P

TINY = P.PositionsConfig(train_length=8, min_train_length=4, test_lengths=(8, 16), seeds=2, d_model=8, layers=1,
                         steps=3, batch_size=4, test_sequences=6)


def test_previous_token_batch():
    (x,), y = P.previous_token_batch(3, 6, 16, torch.Generator().manual_seed(0))
    assert y[:, 0].tolist() == [-100] * 3 and torch.equal(y[:, 1:], x[:, :-1])


def test_one_model_per_encoding_and_the_learned_table():
    (x,), _ = P.previous_token_batch(2, 16, 16, torch.Generator().manual_seed(0))
    for e in P.ENCODINGS:
        model = P.build_model(TINY, e).eval()
        assert model.encoder.config.positional == e and model(x).shape == (2, 16, 16)
    assert P.build_model(TINY, "learned").encoder.position.embedding.num_embeddings == 16  # the longest test
    msg = P.learned_refusal(TINY)
    assert "sequence needs positions up to 9 but the learned table has max_len=8" in msg
    with pytest.raises(ValueError, match="encoding"):
        P.build_model(TINY, "t5")


def test_the_model_is_causal():
    model = P.build_model(TINY, "rope").eval()
    (x,), _ = P.previous_token_batch(1, 8, 16, torch.Generator().manual_seed(0))
    x2 = x.clone()
    x2[0, 5] = (x2[0, 5] + 1) % 16
    with torch.no_grad():
        a, b = model(x), model(x2)
    assert torch.allclose(a[0, :5], b[0, :5]) and not torch.allclose(a[0, 5:], b[0, 5:])


def test_pipeline_rows_table_figure(tmp_path, one_thread):
    res = P.run(tmp_path, TINY, command="attnkit experiment positions --quick", log=lambda s: None)
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 * 2 * 2 and {r["x"] for r in rows} == {8, 16}
    assert {r["model"] for r in rows} == set(P.ENCODINGS)
    md = (tmp_path / "positions.md").read_text()
    assert "| test length | sinusoidal | learned | relative (Shaw) | RoPE | ALiBi | none |" in md
    assert "refuses a longer input" in md and "max_len=8" in md
    assert res["verdict"][0].startswith("- sinusoidal: ") and " at 16." in res["verdict"][0]
    assert (tmp_path / "positions.png").stat().st_size > 20_000
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["learned_table_of_train_length"].startswith("LearnedAbsolute")
