"""``attnkit embed`` / ``similarity`` / ``attend`` with the built-in all-MiniLM-L6-v2 (loaded once)."""

import argparse
import io
import json
import re

import numpy as np
import pytest
import torch

from attnkit.cli import pretrained as cli
from attnkit.pretrained import load_pretrained
from attnkit.viz import read_attention_html
from tests.pretrained.test_loader import make_folder


@pytest.fixture(scope="module")
def run():
    parser = argparse.ArgumentParser(prog="attnkit")
    cli.add_parser(parser.add_subparsers())
    model = cli._model(cli.DEFAULT_MODEL)  # cached: every command below reuses it

    def go(*argv):
        args = parser.parse_args(list(argv))
        return args.func(args)

    return go, model


def test_embed_arguments_to_npy(run, tmp_path, capsys):
    go, model = run
    out = tmp_path / "v.npy"
    assert go("embed", "A man is eating food.", "Grüße 🙂", "--out", str(out)) == 0
    v = np.load(out)
    assert v.shape == (2, 384) and v.dtype == np.float32
    np.testing.assert_allclose(v, model.encode(["A man is eating food.", "Grüße 🙂"]).numpy(), atol=1e-6)
    assert "wrote" in capsys.readouterr().out


def test_embed_file_and_stdin_to_jsonl(run, tmp_path, monkeypatch, capsys):
    go, model = run
    src = tmp_path / "texts.txt"
    src.write_text("first line\n\nsecond line\n", encoding="utf-8")
    out = tmp_path / "v.jsonl"
    assert go("embed", "--file", str(src), "--out", str(out)) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # one row per line, the empty line embedded as the empty string: row i is line i
    assert [r["text"] for r in rows] == ["first line", "", "second line"] and len(rows[0]["embedding"]) == 384
    np.testing.assert_allclose(rows[2]["embedding"], model.encode(["second line"])[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(rows[1]["embedding"], model.encode([""])[0].numpy(), atol=1e-6)
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO("from stdin\n"))
    assert go("embed") == 0  # no texts, no --file: stdin, JSON lines on stdout
    row = json.loads(capsys.readouterr().out.strip())
    assert row["text"] == "from stdin" and len(row["embedding"]) == 384


def test_embed_progress_flag(run, tmp_path, capsys):
    go, _ = run
    out = tmp_path / "v.npy"
    assert go("embed", "one", "two", "three", "--out", str(out), "--progress") == 0
    assert "3/3" in capsys.readouterr().err
    assert go("embed", "one", "two", "--out", str(out), "--no-progress") == 0
    assert capsys.readouterr().err == ""
    assert go("embed", "one", "--out", str(out)) == 0  # default: a bar only when stderr is a terminal
    assert capsys.readouterr().err == ""


def test_embed_workers(run, tmp_path, capsys):
    go, model = run
    out = tmp_path / "v.npy"
    texts = [f"sentence {i} on workers" for i in range(6)]
    assert go("embed", *texts, "--out", str(out), "--batch-size", "2", "--workers", "3") == 0
    np.testing.assert_allclose(np.load(out), model.encode(texts, workers=1).numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="`workers` must be a positive integer"):
        model.encode(["x"], workers=0)
    with pytest.raises(SystemExit):  # the option's range, refused while parsing
        go("embed", "x", "--workers", "0")
    assert "argument --workers: must be an integer in [1, 1024], got '0'" in capsys.readouterr().err


def test_embed_errors(run, tmp_path):
    go, _ = run
    with pytest.raises(FileNotFoundError, match="--file not found"):
        go("embed", "--file", str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="must end in .npy or .jsonl"):
        go("embed", "x", "--out", str(tmp_path / "v.csv"))


def test_similarity(run, capsys):
    go, model = run
    assert go("similarity", "A man is eating food.", "A man is eating a piece of bread.") == 0
    value = float(capsys.readouterr().out)
    a, b = model.encode(["A man is eating food.", "A man is eating a piece of bread."])
    assert abs(value - float(a @ b)) < 1e-5 and 0.5 < value < 1.0
    go("similarity", "same", "same")
    assert abs(float(capsys.readouterr().out) - 1.0) < 1e-5


def test_attend_summary_says_what_the_heads_do(run, tmp_path, capsys):
    go, model = run
    assert go("attend", "I saw a saw", "--no-plots") == 0
    text = capsys.readouterr().out
    assert "[CLS] i saw a saw [SEP]" in text and "What the 72 heads do (6 layers x 12 heads)" in text
    roles = [line for line in text.splitlines() if line.startswith("  ") and re.search(r": +\d+ heads? +L", line)]
    assert sum(int(line.split(":")[1].split("head")[0]) for line in roles) == 72  # every head has one role
    assert "Weight the words put on [CLS]/[SEP], per layer" in text
    links = next(line for line in text.splitlines() if line.startswith("Strongest word -> word links in layer 6"))
    res = model.attend("I saw a saw")
    last = res.attentions[5].mean(0)[1:-1, 1:-1].clone()  # words only
    last.fill_diagonal_(0)
    q, k = divmod(int(last.argmax()), last.shape[1])
    # token q + 1 of the list (after [CLS]) is number q + 2, as q^{q+2} in the pages
    assert links.split(": ", 1)[1].startswith(f"{res.tokens[q + 1]}@{q + 2} -> {res.tokens[k + 1]}@{k + 2}")


def test_attend_writes_every_layer_and_head(run, tmp_path, capsys):
    go, _ = run
    folder = make_folder(tmp_path / "tiny")  # 2 layers x 2 heads: quick to draw
    out = tmp_path / "png"
    assert go("attend", "I saw a saw", "--model", str(folder), "--out", str(out), "--each-head") == 0
    printed = capsys.readouterr().out
    assert "wrote 7 PNG files" in printed and "attention.html" in printed and "lecture.html" in printed
    page = read_attention_html(out / "attention.html")  # the page holds the model's own weights
    res = load_pretrained(folder).attend("I saw a saw")
    labels = [f"{t}@{i + 1}" for i, t in enumerate(res.tokens)]  # numbered from 1, as q^1
    assert page["queries"] == labels and page["keys"] == labels and len(page["layer_names"]) == 2
    torch.testing.assert_close(torch.tensor(page["weights"]), res.attentions.double(), atol=5e-5, rtol=0)
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["attention_grid.png", "layer1.png", "layer1_head1.png", "layer1_head2.png", "layer2.png",
                    "layer2_head1.png", "layer2_head2.png"]
    assert all((out / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    from attnkit.viz.lecture import read_lecture_html

    lecture = read_lecture_html(out / "lecture.html")
    assert lecture["queries"] == labels and lecture["q"].shape[:3] == (2, 2, len(labels))



def test_attend_on_a_long_text_keeps_the_model_s_tokens_and_bounded_pngs(tmp_path, capsys):
    """Issue 65, item 2: 100,000 characters; titles cut, PNGs within the README's bound, the truncation
    warning one line numbering texts from 1."""
    from PIL import Image

    from attnkit.cli.main import main

    folder = make_folder(tmp_path / "tiny")  # max_seq_length 16
    out = tmp_path / "png"
    text = " ".join(["the cat sat on a mat"] * 20000)[:100000]
    assert main(["attend", text, "--model", str(folder), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("16 tokens: [CLS] the cat sat on a mat the cat")
    assert captured.err == ("warning: tiny: 1 text(s) longer than the model's limit of 16 tokens were truncated to 16 "
                            "tokens (first: text 1)\n")
    for png in out.glob("*.png"):
        with Image.open(png) as im:
            assert im.size[0] <= 2100 and im.size[1] <= 1800, (png, im.size)
    page = read_attention_html(out / "attention.html")
    assert len(page["queries"]) == 16 and len(page["title"]) < 200, page["title"]


def test_registered_in_main():
    from attnkit.cli.main import COMMAND_MODULES

    assert "pretrained" in COMMAND_MODULES


def test_embed_dtype_int8_and_the_bf16_alias(run, tmp_path):
    go, model = run
    texts = ["A man is eating food.", "Two dogs play in the snow."]
    out = tmp_path / "v.npy"
    assert go("embed", *texts, "--out", str(out), "--dtype", "int8") == 0
    v, want = np.load(out), model.encode(texts).numpy()
    cos = (v * want).sum(1) / np.linalg.norm(v, axis=1) / np.linalg.norm(want, axis=1)
    assert v.dtype == np.float32 and cos.min() >= 0.99 and not np.array_equal(v, want)
    parser = argparse.ArgumentParser(prog="attnkit")
    cli.add_parser(parser.add_subparsers())
    for argv, dtype in ((["--bf16"], torch.bfloat16), (["--dtype", "bfloat16"], torch.bfloat16), ([], torch.float32),
                        (["--dtype", "int8"], torch.int8), (["--bf16", "--dtype", "bfloat16"], torch.bfloat16)):
        assert cli._dtype(parser.parse_args(["similarity", "a", "b", *argv])).torch == dtype
    with pytest.raises(ValueError, match="--bf16 is --dtype bfloat16; it contradicts --dtype int8"):
        go("embed", "x", "--bf16", "--dtype", "int8")
    with pytest.raises(SystemExit):  # argparse: one line naming --dtype and its choices
        go("embed", "x", "--dtype", "int4")
