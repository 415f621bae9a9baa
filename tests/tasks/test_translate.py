"""The translation task end to end on a tiny generated corpus: train, translate, evaluate, attention, Python API,
bad input."""

import io
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import attnkit
from attnkit.cli.main import main
from attnkit.tasks.translator import TranslationWarning

from .corpus import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = ["--vocab-size", "120", "--d-model", "32", "--num-heads", "2", "--d-ff", "64", "--num-encoder-layers", "1",
         "--num-decoder-layers", "1", "--dropout", "0.0", "--batch-tokens", "400", "--warmup-steps", "20",
         "--lr", "3e-3", "--no-progress", "--threads", "1", "--max-minutes", "0", "--no-bf16"]


def files_args(paths):
    return ["--train-src", str(paths["train_src"]), "--train-tgt", str(paths["train_tgt"]),
            "--dev-src", str(paths["dev_src"]), "--dev-tgt", str(paths["dev_tgt"])]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A model trained for 300 steps (about 10 s): it translates the toy language well."""
    root = tmp_path_factory.mktemp("translate")
    paths = write_corpus(root / "data")
    out = root / "run"
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        code = main(["train", "translate", *files_args(paths), *SMALL, "--max-steps", "300", "--eval-every", "50",
                     "--average", "3", "--out", str(out)])
    finally:
        torch.set_num_threads(n)
    assert code == 0
    return out, paths


def test_training_writes_the_run_and_averages(run, capsys):
    out, _ = run
    assert (out / "bpe.json").exists() and (out / "curves.png").exists()
    best = json.loads((out / "best.json").read_text())
    assert best["path"] == "average" and best["averaged"] == ["ckpt-00000200", "ckpt-00000250", "ckpt-00000300"]
    meta = json.loads((out / "average" / "meta.json").read_text())
    assert meta["task"] == "translate" and meta["model"]["share_embeddings"]


def test_translate_python_api(run):
    out, paths = run
    tr = attnkit.load_pretrained(out)
    assert tr.translate("Ein hund sieht ein rotes auto.") == ["A dog sees a red car."]
    src = paths["dev_src"].read_text(encoding="utf-8").splitlines()[:20]
    ref = paths["dev_tgt"].read_text(encoding="utf-8").splitlines()[:20]
    greedy, beam = tr.translate(src), tr.translate(src, num_beams=4)
    assert sum(g == r for g, r in zip(greedy, ref)) >= 16
    assert sum(b == r for b, r in zip(beam, ref)) >= 16
    # the same sentences one at a time give the same translations as in padded batches
    assert [tr.translate(s)[0] for s in src[:6]] == greedy[:6]
    sampled = tr.translate(src[:5], do_sample=True, top_k=1, seed=3)
    assert sampled == greedy[:5]


def _dev_right(tr, paths, n: int) -> int:
    """How many of the first n dev sentences ``tr`` translates exactly as the reference."""
    src = paths["dev_src"].read_text(encoding="utf-8").splitlines()[:n]
    ref = paths["dev_tgt"].read_text(encoding="utf-8").splitlines()[:n]
    return sum(g == r for g, r in zip(tr.translate(src), ref))


def _cli_translates_in(out, dtype: str, capsys) -> None:
    assert main(["translate", str(out), "Ein hund sieht ein rotes auto.", "--dtype", dtype]) == 0
    assert capsys.readouterr().out.strip() == "A dog sees a red car."


def test_bfloat16_weights(run, capsys):
    out, paths = run
    tr = attnkit.load_pretrained(out, dtype=torch.bfloat16)
    assert {p.dtype for p in tr.model.parameters()} == {torch.bfloat16}
    assert _dev_right(tr, paths, 20) >= 15  # the toy language, as in float32
    _cli_translates_in(out, "bfloat16", capsys)
    half = attnkit.load_pretrained(out, dtype=torch.float16)  # Python's only: not on the command line
    assert {p.dtype for p in half.model.parameters()} == {torch.float16}
    with pytest.raises(ValueError, match=r"options \['device'\] do not apply"):
        attnkit.load_pretrained(out, dtype=torch.bfloat16, device="cpu")
    with pytest.raises(SystemExit):
        main(["translate", str(out), "Ein hund.", "--dtype", "float16"])
    assert "invalid choice: 'float16'" in capsys.readouterr().err


def test_int8_layers(run, capsys):
    out, paths = run
    tr = attnkit.load_pretrained(out, dtype="int8")
    assert {p.dtype for p in tr.model.parameters()} == {torch.float32}  # the reference stays float32
    assert type(tr.decoder.layers[0]).__name__ == "QuantLayer"
    assert _dev_right(tr, paths, 10) >= 7  # the toy language, as in float32
    _cli_translates_in(out, "int8", capsys)
    with pytest.raises(ValueError, match=r"^load_pretrained: dtype='int4' is not one of float32, bfloat16, int8, "
                                         r"float16, float64 \(a name, or its torch dtype\)$"):
        attnkit.load_pretrained(out, dtype="int4")


def test_cli_translate_evaluate_and_attention(run, capsys, tmp_path, monkeypatch):
    out, paths = run
    assert main(["translate", str(out), "Ein mann fährt ein fahrrad.", "--beam", "3"]) == 0
    assert capsys.readouterr().out.strip() == "A man rides a bike."
    # texts after options, as after the run folder
    assert main(["translate", str(out), "--beam", "3", "Ein mann fährt ein fahrrad.", "Ein hund sieht ein haus."]) == 0
    assert capsys.readouterr().out.splitlines() == ["A man rides a bike.", "A dog sees a house."]
    # no texts and no --file: the lines piped on stdin; --file - is stdin too
    monkeypatch.setattr("sys.stdin", io.StringIO("Ein kind hat ein ball.\n"))
    assert main(["translate", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == ["A child has a ball."]
    monkeypatch.setattr("sys.stdin", io.StringIO("Ein hund sieht ein haus.\n"))
    assert main(["translate", str(out), "Ein kind hat ein ball.", "--file", "-"]) == 0
    assert capsys.readouterr().out.splitlines() == ["A child has a ball.", "A dog sees a house."]
    assert main(["translate", str(out), "--file", str(tmp_path / "missing.txt")]) == 1
    assert "translate: --file not found" in capsys.readouterr().err
    # decoding options out of range (refused while parsing), or sampling's without --sample: one line naming
    # the option as typed
    for bad, words in ((["--beam", "0"], "attnkit translate: error: argument --beam: must be an integer in [1, 1024], "
                                         "got '0'"),
                       (["--max-new-tokens", "-1"], "--max-new-tokens: must be an integer in [0, 65536]"),
                       (["--sample", "--top-p", "1.5"], "--top-p: must be a number in (0, 1]"),
                       (["--sample", "--temperature", "0"], "--temperature: must be a number in [0.0001, 10000]")):
        with pytest.raises(SystemExit):
            main(["translate", str(out), "Ein hund.", *bad])
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, (bad, err)
    assert main(["translate", str(out), "Ein hund.", "--top-p", "0.9", "--seed", "1"]) == 1
    err = capsys.readouterr().err
    assert "--top-p, --seed apply with --sample only" in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(SystemExit):
        main(["evaluate", str(out), "--data", str(paths["dev_src"]), "--ref", str(paths["dev_tgt"]), "--beam", "0"])
    assert "attnkit evaluate: error: argument --beam: must be an integer in [1, 1024]" in capsys.readouterr().err
    inp = tmp_path / "in.txt"
    inp.write_text("Ein kind hat ein ball.\n\nEin hund sieht ein haus.\n", encoding="utf-8")
    assert main(["translate", str(out), "--file", str(inp), "--sample", "--top-p", "0.5"]) == 0
    res = capsys.readouterr()
    assert res.out.splitlines() == ["A child has a ball.", "", "A dog sees a house."]
    assert "text 2 is empty" in res.err
    assert main(["evaluate", str(out), "--data", str(paths["dev_src"]), "--ref", str(paths["dev_tgt"]),
                 "--beam", "2"]) == 0
    text = capsys.readouterr().out
    assert "beam 2" in text and "sacreBLEU signature: nrefs:1|case:mixed|eff:no|tok:13a" in text
    bleu = float(text.split("BLEU ")[1].split()[0])
    assert bleu > 80
    assert main(["evaluate", str(out), "--data", str(paths["dev_src"]), "--ref", str(paths["dev_tgt"]),
                 "--dtype", "bfloat16"]) == 0  # the weights in bfloat16: the toy language as well
    assert float(capsys.readouterr().out.split("BLEU ")[1].split()[0]) > 80
    att = tmp_path / "att"
    assert main(["translate", str(out), "Ein frau hat ein auto.", "--attention", str(att)]) == 0
    assert sorted(p.name for p in att.iterdir()) == ["attention_0.html", "cross_attention_0.html",
                                                     "cross_attention_0_layer1.png", "cross_attention_0_lecture.html",
                                                     "decoder_self_attention_0_lecture.html"]
    from attnkit.viz import read_attention_html

    page = read_attention_html(att / "cross_attention_0.html")
    assert page["keys"][-1] == "</s>" and page["queries"][-1] == "</s>"
    w = torch.tensor(page["weights"])  # (layers, heads, target, source)
    assert w.shape == (1, 2, len(page["queries"]), len(page["keys"]))
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1], dtype=w.dtype), atol=1e-3, rtol=0)
    from attnkit.viz.lecture import read_lecture_html

    lec = read_lecture_html(att / "cross_attention_0_lecture.html")  # the model re-run over its translation
    assert lec["queries"] == page["queries"] and lec["keys"] == page["keys"]
    q, k = torch.tensor(lec["q"]), torch.tensor(lec["k"])  # (layers, heads, T, dh), (layers, heads, S, dh)
    recomputed = (q @ k.transpose(-1, -2) * lec["scale"]).softmax(-1)  # the lecture's chain: A' = softmax(K^T Q)
    torch.testing.assert_close(recomputed, w, atol=5e-3, rtol=0)  # equals the weights decoding step by step saw


def test_bad_input_gives_clear_errors_and_warnings(run, capsys, tmp_path):
    out, paths = run
    tr = attnkit.load_pretrained(out)
    long = " ".join(["Ein hund sieht ein rotes auto."] * 30)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = tr.translate(["", long, "Ein hund 🚲 sieht ein auto."])
    msgs = [str(w.message) for w in caught if issubclass(w.category, TranslationWarning)]
    assert res[0] == "" and res[1] and res[2]
    assert any("text 1 is empty" in m for m in msgs)
    assert any("text 2:" in m and "limit of 127" in m for m in msgs)
    assert [m.split(":")[0] for m in msgs if "never seen" in m] == ["text 3"] and any("'🚲'" in m for m in msgs)
    # mismatched line counts: both files and both counts named
    short = tmp_path / "short.tgt"
    short.write_text("A dog.\n", encoding="utf-8")
    assert main(["evaluate", str(out), "--data", str(paths["dev_src"]), "--ref", str(short)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(paths["dev_src"]) in err and str(short) in err and "40 lines" in err
    assert "1 lines" in err
    # a run folder of another task
    other = tmp_path / "other"
    (other / "ckpt-00000001").mkdir(parents=True)
    (other / "ckpt-00000001" / "meta.json").write_text(json.dumps({"task": "tagger", "format_version": 1,
                                                                                   "step": 1}))
    assert main(["translate", str(other), "Hallo."]) == 1
    err = capsys.readouterr().err.strip()
    assert "'tagger' run, not a translation run" in err and err.count("\n") == 0
    with pytest.raises(ValueError, match="only translation runs"):
        attnkit.load_pretrained(other)
    assert main(["evaluate", str(out), "--data", "nonsense"]) == 1
    assert "trained on your own files; give --data SOURCE --ref REFERENCE" in capsys.readouterr().err


def test_resume_continues_with_the_same_vocabulary(tmp_path):
    paths = write_corpus(tmp_path / "data", n_train=120, n_dev=10)
    out = tmp_path / "run"
    args = ["train", "translate", *files_args(paths), *SMALL, "--eval-every", "10", "--average", "0", "--out", str(out)]
    assert main([*args, "--max-steps", "10"]) == 0
    bpe = (out / "bpe.json").read_bytes()
    assert main([*args, "--max-steps", "20", "--resume"]) == 0
    assert (out / "bpe.json").read_bytes() == bpe
    assert json.loads((out / "latest.json").read_text())["step"] == 20


@pytest.mark.slow
def test_torchrun_two_processes_train_translation(tmp_path):
    paths = write_corpus(tmp_path / "data", n_train=200, n_dev=20)
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
           "attnkit.cli.main", "train", "translate", *files_args(paths), *SMALL, "--max-steps", "40",
           "--eval-every", "20", "--average", "2", "--out", str(out)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "world size: 2" in r.stdout and r.stdout.count("averaged 2 checkpoints") == 1  # rank 0 only
    assert "dev (average)" in r.stdout
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    dev = [r for r in recs if r.get("split") == "dev"]
    assert len(dev) == 2 and dev[-1]["loss"] < dev[0]["loss"]
