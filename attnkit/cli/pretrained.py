"""``attnkit embed`` / ``similarity`` / ``attend``: a pretrained encoder from the command line.

    attnkit embed "first text" "second text" --out vectors.npy
    attnkit embed --file texts.txt --out vectors.jsonl      (one text a line; "-" reads stdin)
                                      (on stderr: a progress bar on a terminal, else a line at least every 10 s)
    attnkit similarity "A man is eating food." "A man eats."
    attnkit attend "I saw a saw" --out runs/attend

Texts longer than the model's limit (256 word pieces for all-MiniLM-L6-v2) are truncated, with a
warning. ``attend`` prints what the heads do (``attnkit.viz.summary``) and writes attention.html (the
model view of every layer and head, the head view's lines and the matrix), lecture.html (the lecture's
chain q -> alpha -> softmax -> b -> W^o for any layer, head and token), attention_grid.png (rows =
layers, columns = heads) and layer<N>.png (``--each-head``: also layer<N>_head<H>.png).
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import lru_cache
from pathlib import Path

from ..data.jsonfile import file_problem
from ..inference.dtypes import DTYPES, DType
from ..nn.limits import ints
from ..outputs import out_folder
from .options import (
    add_count_progress_option,
    add_dtype_option,
    add_figures_option,
    add_threads_option,
    progress_to,
    read_lines,
    set_threads,
    utf8_text,
    writes,
)

DEFAULT_MODEL = "all-MiniLM-L6-v2"


@lru_cache(maxsize=2)
def _model(name: str):
    from ..pretrained import load_pretrained

    return load_pretrained(name)


def _dtype(args) -> DType:
    """--dtype (--bf16: bfloat16) -> the compute dtype's row of the dtype table (int8: int8 weights, docs/int8.md)."""
    if args.bf16 and args.dtype not in (None, "bfloat16"):
        raise ValueError(f"--bf16 is --dtype bfloat16; it contradicts --dtype {args.dtype}")
    name = "bfloat16" if args.bf16 else args.dtype or "float32"
    return DTYPES[name]


def _read_texts(args) -> list[str]:
    texts = [utf8_text(t, f"embed: text {i + 1}") for i, t in enumerate(args.texts)]
    if args.file is not None:
        if str(args.file) != "-" and file_problem(args.file) == "no such file":  # else read_lines says what it is
            raise FileNotFoundError(f"embed: --file not found: {args.file}")
        texts += read_lines(args.file)  # every line, empty ones too: row i of the output is line i
    elif not texts:
        if sys.stdin is None or sys.stdin.isatty():
            raise ValueError("embed: give texts as arguments, --file PATH, or pipe them on stdin")
        texts = read_lines("-")
    return texts


def run_embed(args) -> int:
    texts = _read_texts(args)
    set_threads(args)
    vectors = _model(args.model).encode(texts, batch_size=args.batch_size, dtype=_dtype(args),
                                        progress=progress_to(args), workers=args.workers)  # (n, dim)
    out = args.out
    if out is not None and out.suffix == ".npy":
        import numpy as np

        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, vectors.numpy())
        print(f"wrote {out}: {tuple(vectors.shape)} float32")
        return 0
    lines = (json.dumps({"text": t, "embedding": [round(x, 7) for x in v]}, ensure_ascii=False)
             for t, v in zip(texts, vectors.tolist()))
    if out is None:
        for line in lines:
            print(line)
        return 0
    if out.suffix not in (".jsonl", ".json"):
        raise ValueError(f"embed: --out must end in .npy or .jsonl, got {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    print(f"wrote {out}: {len(texts)} JSON lines of {vectors.shape[1]} numbers")
    return 0


def run_similarity(args) -> int:
    set_threads(args)
    a, b = utf8_text(args.a, "similarity: the first text"), utf8_text(args.b, "similarity: the second text")
    print(f"{_model(args.model).similarity(a, b, dtype=_dtype(args)):.6f}")
    return 0


def run_attend(args) -> int:
    from ..viz.labels import token_labels
    from ..viz.summary import attention_summary

    text = utf8_text(args.text, "attend: the text")
    set_threads(args)
    out = None if args.no_plots else out_folder(args.out, "attend: --out")  # before the model is loaded
    model = _model(args.model)
    res = model.attend(text)
    tokens = res.tokens
    labels = token_labels(tokens)  # "it@9": positions from 1, as q^9 in the lecture page; repeats told apart
    print(f"{len(tokens)} tokens: {' '.join(tokens)}")
    for line in attention_summary(res.attentions, tokens):
        print(line)
    if args.no_plots:
        return 0
    if writes(args, "html"):
        _attend_pages(args, model, text, res, labels, out)
    if writes(args, "png"):
        _attend_pngs(args, text, res, labels, out)
    return 0


def _quoted(text: str) -> str:
    """The text as figure titles show it: its first 80 characters (the model keeps 256 tokens at most)."""
    return repr(text if len(text) <= 80 else text[:79] + "\u2026")


def _attend_pages(args, model, text: str, res, labels: list[str], out: Path) -> None:
    from ..viz import attention_html
    from ..viz.lecture import model_lecture_html

    quoted = _quoted(text)
    title = f"{quoted} ({args.model})"
    page = attention_html(res.attentions, labels, out / "attention.html", title=title)
    print(f"wrote {page} (every layer and head; click one for its lines and matrix)", flush=True)
    lecture = model_lecture_html(model.model, lambda: model.attend(text), labels, out / "lecture.html",
                                 title=f"{title}: self-attention step by step")
    print(f"wrote {lecture} (pick a layer, head and token: q, k, alpha, softmax, b, W^o with the model's numbers)",
          flush=True)


def _attend_pngs(args, text: str, res, labels: list[str], out: Path) -> None:
    from ..train.progress import ticker
    from ..viz import attention_grid, attention_heatmap
    from ..viz.grid import AttentionGrid

    quoted = _quoted(text)
    n_layers, n_heads = res.attentions.shape[:2]
    count = 1 + n_layers * (1 + (n_heads if args.each_head else 0))
    print(f"writing {count} PNG files to {out} ...", flush=True)
    tick = ticker("attend: PNG files", count, "written")  # a bar on a terminal, else a line at least every 10 s
    written = [attention_grid(res.attentions, out / "attention_grid.png", tokens=labels,
                              title=f"{quoted}: rows = layers, columns = heads")]
    tick.update()
    layer_grid = AttentionGrid((1, *res.attentions.shape[1:]), tokens=labels)  # one figure for every layer
    for n in range(n_layers):  # one layer's heads: (1, H, L, L)
        written.append(layer_grid.write(res.attentions[n:n + 1], out / f"layer{n + 1}.png",
                                        title=f"{quoted}: layer {n + 1}"))
        tick.update()
        for h in range(n_heads if args.each_head else 0):
            written.append(attention_heatmap(res.attentions[n, h], out / f"layer{n + 1}_head{h + 1}.png",
                                             queries=labels, keys=labels, annotate=len(labels) <= 8,
                                             title=f"{quoted}: layer {n + 1}, head {h + 1}"))
            tick.update()
    layer_grid.close()
    tick.close()
    names = "attention_grid.png, layer<N>.png" + (", layer<N>_head<H>.png" if args.each_head else "")
    print(f"wrote {len(written)} PNG files to {out} ({names})")


def _dtype_options(p) -> None:
    add_dtype_option(p, "compute dtype; outputs stay float32", None, "; default float32")
    p.add_argument("--bf16", action="store_true", help="the same as --dtype bfloat16")


def add_parser(sub: argparse._SubParsersAction) -> None:
    def common(p):
        p.add_argument("--model", default=DEFAULT_MODEL,
                       help=f"built-in name or model folder (default {DEFAULT_MODEL})")
        add_threads_option(p)

    p = sub.add_parser("embed", help="sentence vectors of texts (arguments, --file, or stdin)")
    p.add_argument("texts", nargs="*", help="texts to embed")
    p.add_argument("--file", type=Path, default=None,
                   help="a UTF-8 file of texts, one a line ('-' for stdin); one output row per line, an empty line "
                        "embedded as the empty string (default: none; texts come from the arguments, else from stdin)")
    p.add_argument("--out", type=Path, default=None,
                   help="output .npy or .jsonl (default: JSON lines on stdout)")
    p.add_argument("--batch-size", type=ints(1, 65536), default=64, help="texts encoded together in one batch")
    _dtype_options(p)
    add_count_progress_option(p, "the texts encoded")
    p.add_argument("--workers", type=ints(1, 1024), default=None,
                   help="batches encoded at once, one thread each (default: one per torch thread)")
    common(p)
    p.set_defaults(func=run_embed)

    p = sub.add_parser("similarity", help="cosine similarity of two texts")
    p.add_argument("a", metavar="TEXT1", help="the first text")
    p.add_argument("b", metavar="TEXT2", help="the second text")
    _dtype_options(p)
    common(p)
    p.set_defaults(func=run_similarity)

    p = sub.add_parser("attend", help="a text's attention, every layer and head: what the heads do, HTML pages, PNG")
    p.add_argument("text", help="the text whose attention to show")
    p.add_argument("--out", type=Path, default=Path("runs/attend"),
                   help="folder for attention.html, lecture.html and the PNG files")
    add_figures_option(p, "attention.html, lecture.html: fast", "attention_grid.png, layer<N>.png: most of the time")
    p.add_argument("--each-head", action="store_true", help="also one PNG per layer and head (with --figures png "
                                                            "or both)")
    p.add_argument("--no-plots", action="store_true", help="only print the summary of what the heads do (no files)")
    common(p)
    p.set_defaults(func=run_attend)
