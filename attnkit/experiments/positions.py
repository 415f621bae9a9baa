"""Claim 3, the lecture on positional encoding: hand-set position vectors "designed for 128 positions break at
length 129"; sinusoidal tables come from a rule, learned tables from the data, relative positions (Shaw et al.)
depend only on distances; RoPE and ALiBi are in attnkit too.

The task, *previous token*: a sequence of random symbols; at every position the answer is the symbol one
position to the left (the first position has none and is not scored). Nothing but position tells a token which
neighbour is its left one, so a model solves it only through its positional encoding. Each encoding trains one
small causal ``attnkit.nn.Encoder`` (masked self-attention, as a decoder-only model) on lengths from
``min_train_length`` to ``train_length``, the same budget for each, and is scored on fresh sequences of every
``test_lengths``: token accuracy over all positions but the first.

``learned``'s table has ``max(test_lengths)`` rows so it can run at every length; rows beyond the training
length never receive a gradient (a table of exactly ``train_length`` rows refuses longer inputs with a
ValueError: the lecture's "129 for a table of 128"). ``relative`` clips distances at ``max_relative_distance``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

from ..functional.masks import causal
from ..nn import Encoder, TransformerConfig
from ..train.state import seed_everything
from .configs.positions import ENCODINGS, FULL, PositionsConfig
from .runner import accuracy, chance_note, mean_table, param_count, run_notes, seeds_text, train_steps
from .scaffold import measure, results, write_markdown

__all__ = ["PositionsConfig", "ENCODINGS", "PositionModel", "build_model", "previous_token_batch", "run_positions"]

NAMES = {"sinusoidal": "sinusoidal", "learned": "learned", "relative": "relative (Shaw)", "rope": "RoPE",
         "alibi": "ALiBi", "none": "none"}
IGNORE = -100




def previous_token_batch(n: int, length: int, vocab: int, generator: torch.Generator) -> tuple[tuple[Tensor], Tensor]:
    """((symbols (n, L),), answers (n, L)): answer[t] = symbols[t - 1], answer[0] = -100 (not scored)."""
    x = torch.randint(0, vocab, (n, length), generator=generator)
    y = torch.full_like(x, IGNORE)
    y[:, 1:] = x[:, :-1]
    return (x,), y


class PositionModel(nn.Module):
    """Symbol embedding, a causal ``Encoder`` with the config's positional encoding, a linear classifier per
    position: (B, L) -> (B, L, vocab)."""

    def __init__(self, vocab: int, encoder: TransformerConfig):
        super().__init__()
        self.embed = nn.Embedding(vocab, encoder.d_model)
        self.encoder = Encoder(encoder)
        self.head = nn.Linear(encoder.d_model, vocab)
        self.mask = causal()

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.encoder(self.embed(x), self.mask).last_hidden_state)


def build_model(config: PositionsConfig, encoding: str, max_len: int | None = None) -> PositionModel:
    """The model for ``encoding``; ``max_len`` sizes a learned table (default: the longest test length)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"build_model: `encoding` must be one of {ENCODINGS}, got {encoding!r}")
    d = config.d_model
    enc = TransformerConfig(d_model=d, num_heads=4, d_ff=2 * d, num_encoder_layers=config.layers, dropout=0.0,
                            norm_first=True, positional=encoding,
                            max_len=max_len or max(config.train_length, *config.test_lengths),
                            max_relative_distance=config.max_relative_distance)
    return PositionModel(config.vocab, enc)


def _eval_set(config: PositionsConfig, length: int, seed: int) -> list:
    gen = torch.Generator().manual_seed(seed)
    n, size = config.test_sequences, 50
    return [previous_token_batch(min(size, n - i), length, config.vocab, gen) for i in range(0, n, size)]


def run_one(config: PositionsConfig, encoding: str, seed: int) -> list[dict]:
    """Train one model for ``encoding``; one row per test length."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    lengths = torch.randint(config.min_train_length, config.train_length + 1, (config.steps,), generator=gen)
    seed_everything(seed)
    model = build_model(config, encoding)
    t = time.perf_counter()
    train_steps(model, lambda step: previous_token_batch(config.batch_size, int(lengths[step]), config.vocab, gen),
                config.steps, lr=config.lr, warmup=max(1, config.steps // 20), seed=seed,
                what=f"  {NAMES[encoding]}, seed {seed}: training")
    seconds = time.perf_counter() - t
    rows = []
    for length in config.test_lengths:
        rows.append({"model": encoding, "x": length, "seed": seed, "steps": config.steps, "lr": config.lr,
                     "params": param_count(model), "train_seconds": seconds,
                     "test_accuracy": accuracy(model, _eval_set(config, length, 20_000 + seed)),
                     "dev_accuracy": accuracy(model, _eval_set(config, length, 30_000 + seed))})
    return rows


def _work(job: tuple) -> list[dict]:
    return run_one(*job)


def _name(job: tuple) -> str:
    _, encoding, seed = job
    return f"{NAMES[encoding]}, seed {seed}"


def _describe(row: dict) -> str:
    return (f"  {row['model']:>10}  seed {row['seed']}  L={row['x']:5d}  test {100 * row['test_accuracy']:6.2f}%  "
            f"dev {100 * row['dev_accuracy']:6.2f}%  ({row['train_seconds']:.0f} s training)")


def run_positions(out, config: PositionsConfig = PositionsConfig(), *, command: str | None = None, workers: int = 1,
                  threads: int | None = None, log: Callable[[str], None] = print,
                  max_minutes: float | None = None) -> tuple[list[dict], dict]:
    """Every encoding x seed, scored at every test length (rows already in ``out/results.jsonl`` are kept;
    ``workers`` processes of ``threads`` torch threads, ``runner.run_jobs``). Returns (rows, run.json)."""

    def jobs(folder) -> list[tuple]:
        done = {(r["model"], r["seed"]) for r in folder.rows}
        for encoding, seed in sorted(done):  # a model is trained once and scored at every length: all rows or none
            if not all(folder.done(encoding, n, seed) for n in config.test_lengths):
                raise ValueError(f"{folder.results} has some of the rows of {encoding}, seed {seed}; delete them")
        return [(config, e, seed) for e in config.encodings for seed in range(config.seeds) if (e, seed) not in done]

    folder = measure(out, "positions", config, jobs, _work, _describe, command=command, workers=workers,
                     threads=threads, log=log, max_minutes=max_minutes, name=_name)
    return folder.rows, folder.finish({"workers": workers,
                                       "learned_table_of_train_length": learned_refusal(config)})


def learned_refusal(config: PositionsConfig) -> str:
    """What a learned table of exactly ``train_length`` rows says when asked for one position more."""
    model = build_model(config, "learned", max_len=config.train_length)
    try:
        model(torch.zeros(1, config.train_length + 1, dtype=torch.long))
    except ValueError as e:
        return str(e)
    return "no error"  # pragma: no cover - LearnedAbsolute refuses


def verdict(summary: list[dict], config: PositionsConfig) -> list[str]:
    """One sentence per encoding: its accuracy at the training length and at each longer test length."""
    out = []
    for e in config.encodings:
        pts = sorted((s["x"], s["mean"], s["std"]) for s in summary if s["model"] == e and s["mean"] is not None)
        if pts:
            out.append(f"- {NAMES[e]}: " + ", ".join(f"{100 * a:.1f} ± {100 * sd:.1f}% at {n}" for n, a, sd in pts)
                       + ".")
    return out


def report(out, config: PositionsConfig, rows: list[dict], meta: dict) -> dict:
    """``out/positions.png`` and ``out/positions.md`` from the rows."""
    from ..viz.claims import positions_figure

    out = Path(out)
    res = results(rows, config.encodings)
    test, dev, encodings, params = res.test, res.dev, res.present, res.params
    names = {e: NAMES[e] for e in encodings}
    figure = positions_figure(test, out / "positions.png", names, train_length=config.train_length,
                              chance=1 / config.vocab, seeds=config.seeds,
                              note=f"; {config.layers}-layer causal encoder, width {config.d_model}")
    table = mean_table(test, encodings, "test length", names=NAMES, digits=1)
    lines = ["# Positional encodings beyond the training length", "", *run_notes(meta), "",
             f"Task: name the previous token (vocabulary {config.vocab}, chance {100 / config.vocab:.1f}%). "
             f"Training: lengths {config.min_train_length} to {config.train_length}, {config.steps} steps of "
             f"{config.batch_size} sequences, AdamW, warm-up then cosine decay, peak learning rate {config.lr:g}. "
             f"Models: {config.layers}-layer causal encoders of width {config.d_model}, 4 heads: "
             + "; ".join(f"{NAMES[e]} ({params[e]:,} parameters)" for e in encodings) + ". "
             f"The learned table has {max(config.train_length, *config.test_lengths)} rows; its rows past "
             f"{config.train_length} never receive a gradient. A table of exactly {config.train_length} rows "
             f"refuses a longer input: \"{meta.get('learned_table_of_train_length', '')}\"", "",
             f"## Token accuracy (%) at each test length, mean ± standard deviation over {seeds_text(config.seeds)}",
             "",
             table, "", *verdict(test, config), "", "## Dev accuracy (%), for choosing settings", "",
             mean_table(dev, encodings, "test length", names=NAMES, digits=1), ""]
    md = write_markdown(out / "positions.md", lines)
    chance = chance_note(test, chance=1 / config.vocab, samples=lambda n: config.test_sequences * (n - 1),
                         real=FULL, names=NAMES)  # every position but the first is scored
    return {"figure": figure, "markdown": md, "verdict": verdict(test, config), "table": table, "chance": chance}


def run(out, config: PositionsConfig = PositionsConfig(), *, command: str | None = None, workers: int = 1,
        threads: int | None = None, log: Callable[[str], None] = print,
        max_minutes: float | None = None) -> dict:
    """``run_positions`` then ``report``: {"figure", "markdown", "table", "verdict"}."""
    rows, meta = run_positions(out, config, command=command, workers=workers, threads=threads, log=log,
                               max_minutes=max_minutes)
    return report(out, config, rows, meta)
