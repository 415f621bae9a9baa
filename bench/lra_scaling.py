"""Benchmark: LRA's Table 2 on this CPU (a script, not a test): each attention variant alone, the
training speed and peak memory at L = 1K, 2K, 4K, 8K, as ratios to full attention in the same run.

The model is LRA-lite's (token embedding + learned positions, pre-LN encoder of ``--layers`` layers,
d_model ``--d-model``, ``--heads`` heads, mean pooling, linear head); one training step = forward,
backward and an AdamW update on a batch of ``--batch`` random sequences of length L. The variants
use their LRA-lite options (window 32, 2 global tokens, stride ceil(sqrt(L)), 64 features /
landmarks, k = 128). ``full`` is attnkit's automatic path (SDPA's fused kernel, which never holds
the (L, L) scores); ``full-math`` the reference path that does, as the LRA paper's implementations.

Speed: median seconds per step over ``--repeats`` rounds, the variants interleaved round-robin so
they share the machine's load. Memory: each (variant, L) runs in a fresh subprocess; the peak
resident set of one step (VmHWM reset through /proc/self/clear_refs after a warm-up step) minus the
resident set before it: every byte the step touches.

    .venv/bin/python bench/lra_scaling.py --lengths 1024 2048 4096 8192 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import torch
from torch import nn

from attnkit import masks as M
from attnkit.lra.memory import peak_memory
from attnkit.nn import Encoder, TransformerConfig
from attnkit.nn.efficient import StructuredAttention
from attnkit.nn.variants import VARIANTS, attention_factory

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _timing import interleaved_medians, machine, table  # noqa: E402


class Model(nn.Module):
    """tokens (B, L) -> class scores (B, 2) through an encoder of the given attention."""

    def __init__(self, variant: str, length: int, d_model: int, heads: int, layers: int):
        super().__init__()
        cfg = TransformerConfig(d_model=d_model, num_heads=heads, d_ff=2 * d_model, num_encoder_layers=layers,
                                num_decoder_layers=0, dropout=0.0, activation="gelu", norm_first=True,
                                positional="learned", max_len=length)
        if variant == "full-math":
            make = lambda c, p, device, dtype: StructuredAttention(c.d_model, c.num_heads, default_backend="math")  # noqa: E731
        else:
            make = None if variant == "full" else attention_factory(variant)
        self.embed = nn.Embedding(257, d_model)
        self.encoder = Encoder(cfg, attention=make)
        self.out = nn.Linear(d_model, 2)

    def forward(self, tokens):
        return self.out(self.encoder(self.embed(tokens), M.padding(torch.full((tokens.shape[0],), tokens.shape[1])))
                        .last_hidden_state.mean(1))


def _stepper(variant: str, length: int, args):
    torch.manual_seed(0)
    model = Model(variant, length, args.d_model, args.heads, args.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(1, 257, (args.batch, length))
    labels = torch.randint(0, 2, (args.batch,))

    def step():
        loss = nn.functional.cross_entropy(model(tokens), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def child(variant: str, length: int, args) -> None:
    """One (variant, L) in this fresh process: print the peak MB of one training step as JSON."""
    step = _stepper(variant, length, args)
    step()  # warm-up: optimizer state, lazy allocations
    _, mb = peak_memory(step)
    print(json.dumps({"peak_mb": mb}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    p.add_argument("--variants", nargs="+", default=["full", "full-math", *[v for v in VARIANTS if v != "full"]])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--child", nargs=2, metavar=("VARIANT", "L"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args)
        return
    print(f"# {machine()}; batch {args.batch}, d_model {args.d_model}, {args.heads} heads, {args.layers} layers")
    speed, memory = {}, {}
    for length in args.lengths:
        steps = {v: _stepper(v, length, args) for v in args.variants}
        secs = interleaved_medians(steps, iters=1, repeats=args.repeats)
        del steps
        for v, s in secs.items():
            speed[(v, length)] = 1.0 / s
        if not args.no_memory:
            for v in args.variants:
                cmd = [sys.executable, __file__, "--child", v, str(length), "--batch", str(args.batch),
                       "--d-model", str(args.d_model), "--heads", str(args.heads), "--layers", str(args.layers)]
                res = subprocess.run(cmd, capture_output=True, text=True, check=True)
                memory[(v, length)] = json.loads(res.stdout.strip().splitlines()[-1])["peak_mb"]
        print(f"L={length}: " + ", ".join(f"{v} {speed[(v, length)]:.3f} steps/s" for v in args.variants),
              flush=True)
    head = ["variant"] + [f"steps/s L={n}" for n in args.lengths] + [f"x full L={n}" for n in args.lengths]
    rows = [[v] + [speed[(v, n)] for n in args.lengths] + [speed[(v, n)] / speed[("full", n)] for n in args.lengths]
            for v in args.variants]
    print("\nTraining speed (steps/s, and relative to full attention)\n" + table(head, rows))
    if memory:
        head = ["variant"] + [f"MB L={n}" for n in args.lengths] + [f"x full L={n}" for n in args.lengths]
        rows = [[v] + [memory[(v, n)] for n in args.lengths]
                + [memory[(v, n)] / memory[("full", n)] if memory[("full", n)] else float("nan") for n in args.lengths]
                for v in args.variants]
        print("\nPeak memory of one training step (MB, and relative to full attention)\n" + table(head, rows))


if __name__ == "__main__":
    main()
