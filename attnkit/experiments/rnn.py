"""Claim 2: "self-attention can replace the RNN: any position reaches any other in one step (an RNN must carry
the vector in its memory all the way), and all outputs are computed in parallel".

The task, *marked recall*: a sequence of L random symbols (``vocab`` of them) whose first token carries a mark
(a learned flag vector added to its embedding); the answer, read at the last position, is the marked token's
symbol, L - 1 tokens back. Chance is 1 / ``vocab``. Every batch is freshly generated (no overfitting); the test
set is ``test_sequences`` more, and a dev set of the same size, from other seeds, chooses learning rates.

Three models of the same width d, each one layer: torch's ``nn.GRU`` and ``nn.LSTM`` (the answer from the last
output), and one ``attnkit.nn.Encoder`` layer (sinusoidal positions, the answer from the last position's
output). Each length is trained from scratch with the same step budget. The time of every training step is
recorded; a separate sweep times training steps at ``timing_lengths`` (further than the trained lengths: a few
steps each), at 1 thread and at one per core (the parallel claim: the GRU's L
steps run one after another, self-attention's L outputs at once).
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

from ..nn import Encoder, TransformerConfig
from ..train.state import seed_everything
from ..viz.complexity import fit_exponent
from .configs.rnn import MODELS, RnnConfig
from .runner import accuracy, mean_table, param_count, run_notes, seeds_text, train_steps
from .scaffold import measure, results, write_markdown

__all__ = ["RnnConfig", "MODELS", "Recurrent", "Attention", "build_model", "recall_batch", "run_rnn", "time_steps"]

NAMES = {"gru": "GRU", "lstm": "LSTM", "self-attention": "self-attention"}




def recall_batch(n: int, length: int, vocab: int, generator: torch.Generator) -> tuple[tuple[Tensor, Tensor], Tensor]:
    """``n`` sequences: ((symbols (n, L) in [0, vocab), marks (n, L) with 1 at position 0), answers (n,))."""
    x = torch.randint(0, vocab, (n, length), generator=generator)
    marks = torch.zeros(n, length, dtype=torch.long)
    marks[:, 0] = 1
    return (x, marks), x[:, 0].clone()


class _Inputs(nn.Module):
    """Symbol embedding + mark embedding: (B, L), (B, L) -> (B, L, d)."""

    def __init__(self, vocab: int, d: int):
        super().__init__()
        self.symbols, self.marks = nn.Embedding(vocab, d), nn.Embedding(2, d)

    def forward(self, x: Tensor, marks: Tensor) -> Tensor:
        return self.symbols(x) + self.marks(marks)


class Recurrent(nn.Module):
    """torch's GRU or LSTM (one layer, hidden size d; the LSTM's forget-gate bias starts at 1); logits from the last
    output: (B, L), (B, L) -> (B, vocab)."""

    def __init__(self, kind: str, vocab: int, d: int):
        super().__init__()
        self.inputs = _Inputs(vocab, d)
        self.rnn = (nn.GRU if kind == "gru" else nn.LSTM)(d, d, batch_first=True)
        if kind == "lstm":  # forget-gate bias 1 (Jozefowicz et al. 2015): torch's gates are (input, forget, cell, out)
            with torch.no_grad():
                self.rnn.bias_ih_l0[d:2 * d].fill_(1.0)
                self.rnn.bias_hh_l0[d:2 * d].zero_()
        self.head = nn.Linear(d, vocab)

    def forward(self, x: Tensor, marks: Tensor) -> Tensor:
        out, _ = self.rnn(self.inputs(x, marks))  # (B, L, d): step t waits for step t - 1
        return self.head(out[:, -1])


class Attention(nn.Module):
    """One ``attnkit.nn.Encoder`` layer (pre-LN, 4 heads, d_ff = 2d, sinusoidal positions); logits from the last
    position: (B, L), (B, L) -> (B, vocab)."""

    def __init__(self, vocab: int, d: int, max_len: int):
        super().__init__()
        self.inputs = _Inputs(vocab, d)
        self.encoder = Encoder(TransformerConfig(d_model=d, num_heads=4, d_ff=2 * d, num_encoder_layers=1,
                                                 dropout=0.0, norm_first=True, positional="sinusoidal",
                                                 max_len=max_len))
        self.head = nn.Linear(d, vocab)

    def forward(self, x: Tensor, marks: Tensor) -> Tensor:
        out = self.encoder(self.inputs(x, marks)).last_hidden_state  # (B, L, d): every position at once
        return self.head(out[:, -1])


def build_model(config: RnnConfig, name: str, length: int) -> nn.Module:
    if name == "self-attention":
        return Attention(config.vocab, config.d_model, length)
    if name in ("gru", "lstm"):
        return Recurrent(name, config.vocab, config.d_model)
    raise ValueError(f"build_model: `name` must be one of {MODELS}, got {name!r}")


def _eval_set(config: RnnConfig, length: int, seed: int) -> list:
    gen = torch.Generator().manual_seed(seed)
    n, size = config.test_sequences, 250
    return [recall_batch(min(size, n - i), length, config.vocab, gen) for i in range(0, n, size)]


def run_one(config: RnnConfig, name: str, length: int, seed: int) -> dict:
    """Train ``name`` at ``length`` from seed ``seed``; score fresh dev and test sequences."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    seed_everything(seed)
    model = build_model(config, name, length)
    lr = {"gru": config.gru_lr, "lstm": config.lstm_lr}.get(name, config.attention_lr)
    times = train_steps(model, lambda step: recall_batch(config.batch_size, length, config.vocab, gen),
                        config.steps, lr=lr, warmup=max(1, config.steps // 20), seed=seed,
                        what=f"  {NAMES[name]} at L={length}, seed {seed}: training")
    return {"model": name, "x": length, "seed": seed, "steps": config.steps, "lr": lr, "params": param_count(model),
            "test_accuracy": accuracy(model, _eval_set(config, length, 20_000 + seed)),
            "dev_accuracy": accuracy(model, _eval_set(config, length, 30_000 + seed)),
            "step_ms_median": 1e3 * statistics.median(times), "train_seconds": sum(times)}


def time_steps(config: RnnConfig, thread_counts: tuple[int, ...], log: Callable[[str], None] = print) -> list[dict]:
    """Median time of a training step (forward, backward, AdamW) of every model at every length, per thread
    count; the lengths interleaved so a busy spell of the machine spreads over all of them."""
    rows = []
    before = torch.get_num_threads()
    try:
        for threads in thread_counts:
            torch.set_num_threads(threads)
            for name in config.models:
                for length in config.timing_lengths:
                    gen = torch.Generator().manual_seed(0)
                    seed_everything(0)
                    model = build_model(config, name, length)
                    data = recall_batch(config.batch_size, length, config.vocab, gen)
                    times = train_steps(model, lambda step, data=data: data, config.timing_steps + 1, lr=1e-3)[1:]
                    ms = 1e3 * statistics.median(times)
                    rows.append({"model": name, "x": length, "threads": threads, "step_ms": ms})
                    log(f"  timing {name:>14}  L={length:5d}  {threads} thread(s)  {ms:9.2f} ms per step")
    finally:
        torch.set_num_threads(before)
    return rows


def _work(job: tuple) -> list[dict]:
    return [run_one(*job)]


def _name(job: tuple) -> str:
    _, name, length, seed = job
    return f"{NAMES[name]} at L={length}, seed {seed}"


def _describe(row: dict) -> str:
    return (f"  {row['model']:>14}  L={row['x']:5d}  seed {row['seed']}  test {100 * row['test_accuracy']:6.2f}%  "
            f"dev {100 * row['dev_accuracy']:6.2f}%  {row['step_ms_median']:8.1f} ms/step  "
            f"{row['train_seconds']:.0f} s")


def run_rnn(out, config: RnnConfig = RnnConfig(), *, command: str | None = None, workers: int = 1,
            threads: int | None = None, log: Callable[[str], None] = print,
            max_minutes: float | None = None) -> tuple[list[dict], list[dict], dict]:
    """Every model x length x seed (rows already in ``out/results.jsonl`` are kept; ``workers`` processes of
    ``threads`` torch threads, ``runner.run_jobs``), then the timing sweep in this process (``out/timing.jsonl``,
    at 1 thread and at one per core). Returns (rows, timing rows, run.json)."""
    folder = measure(out, "rnn", config, lambda folder: [  # seed by seed, the longest jobs first
        (config, name, n, seed) for seed in range(config.seeds) for n in sorted(config.lengths, reverse=True)
        for name in config.models if not folder.done(name, n, seed)], _work, _describe, command=command,
        workers=workers, threads=threads, log=log, max_minutes=max_minutes, name=_name)
    timing = []
    if config.timing_steps and not folder.jobs_left:  # a run stopped by --max-minutes times on its next run
        timing = time_steps(config, tuple(sorted({1, os.cpu_count() or 1})), log)
        (folder.out / "timing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in timing), encoding="utf-8")
    return folder.rows, timing, folder.finish({"workers": workers})


def verdict(summary: list[dict], timing: list[dict], config: RnnConfig) -> list[str]:
    """Sentences from the means: the longest length each model still recalls (>= 90%), where it falls to
    near chance (< 2 / vocab), and the time per step at the longest length with its growth and thread speed-up."""
    out = []
    chance = 1 / config.vocab
    for m in config.models:
        pts = sorted((s["x"], s["mean"]) for s in summary if s["model"] == m and s["mean"] is not None)
        if not pts:
            continue
        good = [n for n, a in pts if a >= 0.9]
        fail = [n for n, a in pts if a < 2 * chance]
        out.append(f"- {NAMES[m]}: " + (f"recalls (>= 90%) up to L = {max(good)}" if good else "recalls at no length")
                   + (f", near chance (< {200 * chance:.0f}%) from L = {min(fail)}" if fail else ", above "
                      f"{200 * chance:.0f}% at every length") + "; "
                   + ", ".join(f"{a * 100:.1f}% at {n}" for n, a in pts) + ".")
    threads = sorted({t["threads"] for t in timing})
    if timing:
        longest = max(t["x"] for t in timing)
        ms = {(t["model"], t["threads"]): t["step_ms"] for t in timing if t["x"] == longest}
        for m in config.models:
            pts = sorted((t["x"], t["step_ms"]) for t in timing if t["model"] == m and t["threads"] == threads[-1])
            if len(pts) < 3:
                continue
            grow = fit_exponent(*zip(*pts))
            speedup = (f", {ms[(m, threads[0])] / ms[(m, threads[-1])]:.2f}x faster on {threads[-1]} threads than "
                       f"on {threads[0]}" if len(threads) > 1 else "")
            out.append(f"- {NAMES[m]}: {ms[(m, threads[-1])]:.1f} ms per training step at L = {longest} "
                       f"({threads[-1]} threads){speedup}; time grows like L^{grow:.2f}.")
    return out


def report(out, config: RnnConfig, rows: list[dict], timing: list[dict], meta: dict) -> dict:
    """``out/rnn.png`` and ``out/rnn.md`` from the rows and the timing sweep."""
    from ..viz.claims import rnn_figure

    out = Path(out)
    res = results(rows, config.models)
    test, dev, models, params = res.test, res.dev, res.present, res.params
    names = {m: NAMES[m] for m in models}
    figure = rnn_figure(test, timing, out / "rnn.png", names, chance=1 / config.vocab, batch=config.batch_size,
                        seeds=config.seeds,
                        note=f"; width {config.d_model}, {config.steps} steps per length")
    table = mean_table(test, models, "L", names=NAMES, digits=1)
    lines = ["# Self-attention against GRU and LSTM: distance and time per step", "", *run_notes(meta), "",
             "Models (one layer each, width " + f"{config.d_model}): " + "; ".join(
                 f"{NAMES[m]} ({params[m]:,} parameters at the longest length)" for m in models) + ". "
             f"{config.steps} steps of {config.batch_size} fresh sequences at every length, AdamW, warm-up then "
             f"cosine decay, peak learning rate {config.gru_lr:g} (GRU), {config.lstm_lr:g} (LSTM) and "
             f"{config.attention_lr:g} (self-attention), each chosen on dev sequences (seed 0). "
             "The LSTM's forget-gate bias starts at 1 (Jozefowicz et al. 2015).", "",
             f"## Test accuracy (%) of recalling the marked first token, mean ± standard deviation over "
             f"{seeds_text(config.seeds)} (chance {100 / config.vocab:.1f}%)", "", table, "",
             *verdict(test, timing, config),
             "", "## Dev accuracy (%), for choosing learning rates", "",
             mean_table(dev, models, "L", names=NAMES, digits=1), ""]
    if timing:
        threads = sorted({t["threads"] for t in timing})
        lines += [f"## Time per training step (ms, median of {config.timing_steps}; batch {config.batch_size})", "",
                  "| L | " + " | ".join(f"{NAMES[m]}, {th} thr." for m in models for th in threads) + " |",
                  "| ---: |" + " ---: |" * (len(models) * len(threads))]
        ms = {(t["model"], t["x"], t["threads"]): t["step_ms"] for t in timing}
        for n in sorted({t["x"] for t in timing}):
            lines.append(f"| {n} | " + " | ".join(f"{ms[(m, n, th)]:.1f}" if (m, n, th) in ms else "n/a"
                                                  for m in models for th in threads) + " |")
        lines.append("")
    md = write_markdown(out / "rnn.md", lines)
    return {"figure": figure, "markdown": md, "verdict": verdict(test, timing, config), "table": table}


def run(out, config: RnnConfig = RnnConfig(), *, command: str | None = None, workers: int = 1,
        threads: int | None = None, log: Callable[[str], None] = print,
        max_minutes: float | None = None) -> dict:
    """``run_rnn`` then ``report``: {"figure", "markdown", "table", "verdict"}."""
    rows, timing, meta = run_rnn(out, config, command=command, workers=workers, threads=threads, log=log,
                                 max_minutes=max_minutes)
    return report(out, config, rows, timing, meta)
