"""A/B of the inference engines between this checkout and a git revision: one process, calls interleaved.

What ``bench/generation.py``, ``bench/nat.py`` and ``bench/embed.py`` time, on both versions in the same
process, alternating repeat by repeat (so the ratio holds under any load; see ``bench/attention_ab.py``, whose
``load_base`` imports the revision's ``attnkit/`` as ``attnkit_base``). Each version builds its own engine from
the same weights through its own public entry points (``load_pretrained`` for folders, its translator's
``decoder`` for models), and the outputs of the two are compared (the same tokens; embeddings to 1e-5):

- generation: a random Marian model of Transformer-base shape (``bench/generation.py``'s ``base_folder``: 6+6
  layers, d_model 512, 8 heads, FFN 2048, vocabulary 8000), source length 24, ``--new-tokens`` forced; batch 1
  greedy and ``--beam-batch`` (32) with 4 beams, float32 and int8 (and batch 1 in bfloat16);
- nat: ``bench/nat.py``'s rows on random models of the translate task's default shape (3+3 layers, d_model
  256, 4 heads, FFN 1024, vocabulary 8000, pre-LN; trained runs are not needed to time the engines): AR greedy
  and beam 5, NAT one pass with 1 length, Mask-Predict 4 and 10 iterations with 3 lengths, at batch 1 (a
  14-token sentence) and ``--nat-batch`` (64);
- embed: ``bench/embed.py``'s ``SentenceEncoder.encode`` of all-MiniLM-L6-v2 on ``--sentences`` random
  sentences in float32 and ``--bf16-sentences`` in bfloat16, batch 64.

Each repeat times both versions once, in turns (the revision first in even repeats, this checkout first in odd
ones); the first calls, which compare the outputs, warm both up. Ratio = the revision's median time / this
checkout's (> 1: this checkout faster); "paired": the median of the ratios of the two calls of each repeat,
with its quartiles. Each row is printed when its case is done.

    flock /tmp/attnkit-heavy.lock .venv/bin/python bench/engines_ab.py --base REV [--repeats 5] [--threads 2]
        [--only generation nat embed] [--new-tokens 32 --beam-batch 32 --nat-batch 64 --sentences 500]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from _timing import machine  # noqa: E402
from attention_ab import load_base  # noqa: E402

import attnkit  # noqa: E402


def sub(m, name: str):
    """Version ``m``'s subpackage ``name`` (attnkit.generation, attnkit_base.pretrained...), or None."""
    try:
        return importlib.import_module(f"{m.__name__}.{name}")
    except ModuleNotFoundError:
        return None


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and (torch.equal(a, b) or (a.is_floating_point() and torch.allclose(
            a.float(), b.float(), atol=1e-5, rtol=1e-5)))
    return all(_same(x, y) for x, y in zip(a, b))


def generation_cases(new, base, root: Path, new_tokens: int, beam_batch: int):
    """(name, {version: fn}) of generate on a Marian folder's engine."""
    import generation as bench_generation

    folder = bench_generation.base_folder(root)
    g = torch.Generator().manual_seed(0)
    cases = []
    for dtype, runs in ((torch.float32, ((1, 1), (beam_batch, 4))), (torch.bfloat16, ((1, 1),)),
                        (torch.int8, ((1, 1), (beam_batch, 4)))):
        tr = {m: sub(m, "load").load_pretrained(folder, dtype=dtype) for m in (new, base)}
        pad = tr[new].config.pad_token_id
        for batch, beams in runs:
            ids = torch.randint(2, pad, (batch, 24), generator=g)
            ids[:, -1] = 0  # </s>

            def run(m, ids=ids, beams=beams, t=tr, pad=pad):
                kw = dict(num_beams=beams, min_new_tokens=new_tokens, max_new_tokens=new_tokens, suppress_tokens=[pad])
                return sub(m, "generation").generate(t[m].decoder, ids, None, **kw).sequences

            cases.append((f"generation {str(dtype)[6:]} batch {batch} {'greedy' if beams == 1 else f'beam {beams}'}",
                          run))
    return cases


def _random_models():
    """(AR model, NAT model) of the translate task's defaults, random weights (std as trained weights have)."""
    from attnkit.models.nat import NATConfig, NATModel
    from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel
    from attnkit.nn import TransformerConfig

    tc = TransformerConfig(d_model=256, num_heads=4, d_ff=1024, num_encoder_layers=3, num_decoder_layers=3,
                                  dropout=0.0, norm_first=True, positional="sinusoidal", max_len=128)
    fields = dict(src_vocab_size=8000, tgt_vocab_size=8000, transformer=tc, pad_token_id=0, bos_token_id=1,
                  eos_token_id=2, share_embeddings=True, tie_output=True, max_positions=128)
    torch.manual_seed(0)
    models = [Seq2SeqModel(Seq2SeqConfig(**fields)), NATModel(NATConfig(**fields))]
    with torch.no_grad():
        for m in models:
            for p in m.parameters():
                if p.dim() == 2:
                    p.normal_(std=p.shape[1] ** -0.5)
    return [m.eval() for m in models]


def _engine(m, model):
    """Version ``m``'s engine for ``model``, through its own public choice (its translators' decoders)."""
    inference = sub(m, "inference")
    if hasattr(inference, "engine_for"):
        return inference.engine_for(model)
    nat = hasattr(model, "length_head")  # a revision from before the inference layer
    return sub(m, "pretrained.fast_nat").FastNAT(model) if nat else sub(m, "pretrained.fast_seq2seq").FastSeq2Seq(model)


def _known(cls, config) -> dict:
    """``config.to_dict()`` without the keys an older revision's ``cls`` does not have: a field added later (e.g.
    ``nat_loss``) only at its default, which is what the older revision does anyway."""
    known = {f.name for f in dataclasses.fields(cls)}
    d = config.to_dict()
    extra = {k: d.pop(k) for k in sorted(set(d) - known)}
    defaults = {f.name: f.default for f in dataclasses.fields(type(config)) if f.name in extra}
    if extra != defaults:
        raise ValueError(f"engines_ab: {cls.__name__} of the older revision lacks the settings {extra}")
    return d


def nat_cases(new, base, nat_batch: int):
    """(name, fn) of bench/nat.py's rows on random models: the same state dict in each version's model class."""
    ar_new, nat_new = _random_models()
    engines = {}
    for m in (new, base):
        s2s, nats = sub(m, "models.seq2seq"), sub(m, "models.nat")
        ar = s2s.Seq2SeqModel(s2s.Seq2SeqConfig.from_dict(_known(s2s.Seq2SeqConfig, ar_new.config)))
        ar.load_state_dict(ar_new.state_dict())
        nat = nats.NATModel(nats.NATConfig.from_dict(_known(nats.NATConfig, nat_new.config)))
        nat.load_state_dict(nat_new.state_dict())
        engines[m] = (_engine(m, ar.eval()), _engine(m, nat.eval()))
    g = torch.Generator().manual_seed(1)
    cases = []
    for batch in (1, nat_batch):
        ids = torch.randint(3, 8000, (batch, 14), generator=g)
        ids[:, -1] = 2
        rows = [("AR greedy", 0, dict(num_beams=1)), ("AR beam 5", 0, dict(num_beams=5)),
                ("NAT one pass, 1 length", 1, dict(iterations=1, length_candidates=1)),
                ("Mask-Predict 4 it., 3 lengths", 1, dict(iterations=4, length_candidates=3)),
                ("Mask-Predict 10 it., 3 lengths", 1, dict(iterations=10, length_candidates=3))]
        for name, which, kw in rows:
            def run(m, ids=ids, which=which, kw=kw):
                if which == 0:
                    return sub(m, "generation").generate(engines[m][0], ids, None, min_new_tokens=20,
                                                         max_new_tokens=20, **kw).sequences
                return sub(m, "generation").mask_predict(engines[m][1], ids, None, **kw).sequences

            cases.append((f"nat bench: {name}, batch {batch}", run))
    return cases


def embed_cases(new, base, n: int, n_bf16: int):
    import embed as bench_embed

    enc = {m: sub(m, "pretrained").load_pretrained("all-MiniLM-L6-v2") for m in (new, base)}
    texts = bench_embed.make_sentences(enc[new].tokenizer.get_vocab(), max(n, n_bf16), 0)
    return [(f"embed {str(dt)[6:]} {k} sentences",
             lambda m, dt=dt, k=k: enc[m].encode(texts[:k], batch_size=64, dtype=dt))
            for dt, k in ((torch.float32, n), (torch.bfloat16, n_bf16))]


def timings(fns: dict[str, object], repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each function, ``repeats`` each, timed in turns (the order reversed every other
    repeat): the calls of one repeat ran next to each other."""
    samples = {k: [] for k in fns}
    for r in range(repeats):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            t0 = time.perf_counter()
            fns[k]()
            samples[k].append(time.perf_counter() - t0)
    return samples


def paired(base: list[float], new: list[float]) -> tuple[float, float, float]:
    """The median and the quartiles of the per-repeat ratios base / new: a drift of the host's speed over
    the run hits both calls of a repeat alike, so it moves these less than the ratio of the medians."""
    ratios = [b / n for b, n in zip(base, new)]
    q1, q2, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return q2, q1, q3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="git revision to compare against")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", nargs="+", choices=("generation", "nat", "embed"), default=("generation", "nat", "embed"))
    p.add_argument("--match", default="", help="only the cases whose name this regular expression matches")
    p.add_argument("--new-tokens", type=int, default=32, help="generation: tokens generated per sentence")
    p.add_argument("--beam-batch", type=int, default=32, help="generation: sentences of the beam-4 case")
    p.add_argument("--nat-batch", type=int, default=64, help="nat: sentences of the large batch")
    p.add_argument("--sentences", type=int, default=500, help="embed: texts encoded per call in float32")
    p.add_argument("--bf16-sentences", type=int, default=None, help="embed: in bfloat16 (default --sentences)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base(a.base, Path(tmp))
        print(f"# bench/engines_ab.py: this checkout against {a.base}, medians of {a.repeats} interleaved calls\n"
              f"# {machine()}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load average "
              f"{os.getloadavg()[0]:.2f}; native kernels: {attnkit.functional.native.unavailable() or 'yes'}",
              flush=True)
        cases = []
        if "generation" in a.only:
            cases += generation_cases(attnkit, base, Path(tmp), a.new_tokens, a.beam_batch)
        if "nat" in a.only:
            cases += nat_cases(attnkit, base, a.nat_batch)
        if "embed" in a.only:
            cases += embed_cases(attnkit, base, a.sentences, a.bf16_sentences or a.sentences)
        print(f"| {'case':>52} | {a.base + ' ms':>12} | {'this ms':>12} | {a.base + ' / this':>14} | "
              f"{'paired [quartiles]':>22} | same outputs |\n"
              f"|{'-' * 54}|{'-' * 14}|{'-' * 14}|{'-' * 16}|{'-' * 24}|--------------|", flush=True)
        for name, fn in cases:
            if not re.search(a.match, name):
                continue
            with torch.inference_mode():
                same = _same(fn(attnkit), fn(base))  # also the warm-up of both
                s = timings({"base": lambda fn=fn: fn(base), "new": lambda fn=fn: fn(attnkit)}, a.repeats)
            t = {k: statistics.median(v) for k, v in s.items()}
            mid, q1, q3 = paired(s["base"], s["new"])
            print(f"| {name:>52} | {t['base'] * 1e3:12.1f} | {t['new'] * 1e3:12.1f} | {t['base'] / t['new']:14.3f} | "
                  f"{f'{mid:.3f} [{q1:.3f}, {q3:.3f}]':>22} | {'yes' if same else 'NO':>12} |", flush=True)
        print(f"# load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
