"""Leave one speaker out: a speech recogniser trained on five of FSDD's six speakers, scored on the sixth, for each
speaker in turn (and each seed).

Each fold is a run folder ``OUT/NAME-seedS`` made by ``attnkit train asr --holdout-speaker NAME --seed S`` in a
process of its own, with the README's defaults unless ``train_options`` adds options (an augmentation to compare, a
smaller run); its closing scores come from the run's ``scores.json``. A fold whose row is in ``results.jsonl`` is
skipped, a run stopped part-way continues (``--resume``), a finished run without a row is only scored. A fold's output
goes to its ``train.log``; while it trains, the last line there is printed at least every 10 s (with ``--jobs N``,
which folds are under way). The figure
(``speakers.png``) and the table (``speakers.md``, and ``speakers.json``) give each speaker's digit error rate, mean
and spread over seeds, with CTC one pass and the run's default decoding (beam 5 + CTC 0.5), on the speaker held out
and on the recordings held out (the other five speakers' test recordings); then the mean over the folds and the
worst fold.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from .configs.speakers import QUICK, TINY_OPTIONS, SpeakersConfig
from .runner import WAIT_LINE, RunFolder, run_jobs, run_notes, seeds_text, summarize

__all__ = ["SpeakersConfig", "QUICK", "TINY_OPTIONS", "fold_command", "train_fold", "run_fold", "fold_table", "run"]

METRICS = {"speaker_ctc": "CTC one pass", "speaker_joint": "beam 5 + CTC 0.5",
           "recordings_ctc": "recordings held out, CTC one pass", "recordings_joint": "recordings held out, beam 5 + "
                                                                                     "CTC 0.5"}


def fold_name(speaker: str, seed: int) -> str:
    return f"{speaker}-seed{seed}"


def fold_command(run: Path, config: SpeakersConfig, speaker: str, seed: int, *, threads: int,
                 data_dir: Path | None = None, resume: bool = False) -> list[str]:
    """The ``attnkit train asr`` command line of one fold."""
    return [sys.executable, "-m", "attnkit.cli.main", "train", "asr", "--out", str(run), "--holdout-speaker", speaker,
            "--seed", str(seed), "--threads", str(threads), "--no-progress",
            *(["--data-dir", str(data_dir)] if data_dir is not None else []), *(["--resume"] if resume else []),
            *(TINY_OPTIONS if config.tiny else ()), *shlex.split(config.train_options)]


def _finished(run: Path) -> bool:
    try:
        return bool(json.loads((run / "result.json").read_text(encoding="utf-8")).get("complete"))
    except (OSError, ValueError):
        return False


def train_fold(cmd: list[str], env: dict, log_path: Path, name: str) -> int:
    """Run a fold's ``attnkit train asr`` with its output appended to ``log_path``; its exit status. In the main
    process (``--jobs 1``; with more, the main process says which folds are under way) the log's last line is
    printed at least every ``runner.WAIT_LINE`` seconds: ``  alice-seed0: step 300/2000  (...)``."""
    import multiprocessing

    aloud = multiprocessing.parent_process() is None
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            while True:
                try:
                    return proc.wait(timeout=WAIT_LINE if aloud else None)
                except subprocess.TimeoutExpired:
                    print(f"  {name}: {_last_line(log_path) or 'starting'}", flush=True)
        except BaseException:  # interrupted: the fold's process goes too (it resumes on the next run)
            proc.kill()
            proc.wait()
            raise


def _last_line(path: Path) -> str:
    """The last non-empty line of a log (read from its last 4 KB)."""
    with open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
        lines = f.read().decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else ""


def run_fold(out: Path, config: SpeakersConfig, speaker: str, seed: int, threads: int,
             data_dir: Path | None = None) -> dict:
    """Train (or continue, or only score) one fold; its row of results.jsonl."""
    from ..tasks.asr import SCORES, write_scores
    from ..train.checkpoint import existing_run

    run = Path(out) / fold_name(speaker, seed)
    if not _finished(run):
        run.mkdir(parents=True, exist_ok=True)
        cmd = fold_command(run, config, speaker, seed, threads=threads, data_dir=data_dir,
                           resume=bool(existing_run(run)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), *filter(None, [os.environ.get("PYTHONPATH")])])}
        code = train_fold(cmd, env, run / "train.log", fold_name(speaker, seed))
        if code != 0 or not _finished(run):
            tail = (run / "train.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
            raise RuntimeError(f"experiment speakers: the fold {fold_name(speaker, seed)} failed (exit status {code}"
                               f"; {run / 'train.log'}): {tail[0] if tail else ''}")
    scores = json.loads((run / SCORES).read_text(encoding="utf-8")) if (run / SCORES).exists() else \
        write_scores(run, SimpleNamespace(data_dir=data_dir, download=False))
    result = json.loads((run / "result.json").read_text(encoding="utf-8"))
    sets = scores["sets"]
    row = {"model": "asr", "x": speaker, "seed": seed, "run": run.name, "steps": result["step"],
           "train_seconds": result["train_seconds"], "params": result["params"],
           "speaker_digits": sets["speaker"]["digits"], "recordings_digits": sets["recordings"]["digits"]}
    for name in ("speaker", "recordings"):
        for mode in ("ctc", "joint"):
            row[f"{name}_{mode}"] = sets[name]["modes"][mode]["der"] / 100
            row[f"{name}_{mode}_utterances"] = sets[name]["modes"][mode]["utterance_accuracy"] / 100
    return row


def _work(job: tuple) -> list[dict]:
    return [run_fold(*job)]


def _describe(row: dict) -> str:
    return (f"  {row['x']:>9} seed {row['seed']}: digit errors on the speaker held out "
            f"{100 * row['speaker_ctc']:6.2f}% (CTC one pass), {100 * row['speaker_joint']:6.2f}% (beam + CTC); "
            f"recordings held out "
            f"{100 * row['recordings_ctc']:.2f}%, {100 * row['recordings_joint']:.2f}%  ({row['train_seconds']:.0f} s)")


def fold_table(rows: list[dict], speakers: tuple[str, ...]) -> tuple[str, dict]:
    """The Markdown table (one row per speaker, then the mean over folds and the worst fold; digit error rate %,
    mean ± sd over seeds) and its numbers."""
    stats = {m: {s["x"]: s for s in summarize([{**r, "model": m} for r in rows], m)} for m in METRICS}
    done = [s for s in speakers if s in stats["speaker_ctc"]]
    lines = ["| speaker held out | " + " | ".join(METRICS.values()) + " | seeds |",
             "| --- |" + " ---: |" * (len(METRICS) + 1)]
    cell = lambda s: "n/a" if s["mean"] is None else f"{100 * s['mean']:.2f} ± {100 * s['std']:.2f}"  # noqa: E731
    for spk in done:
        lines.append(f"| {spk} | " + " | ".join(cell(stats[m][spk]) for m in METRICS)
                     + f" | {stats['speaker_ctc'][spk]['n']} |")
    numbers = {"folds": {spk: {m: stats[m][spk] for m in METRICS} for spk in done}}
    if done:
        means = {m: [stats[m][s]["mean"] for s in done if stats[m][s]["mean"] is not None] for m in METRICS}
        numbers["mean"] = {m: sum(v) / len(v) if v else None for m, v in means.items()}
        numbers["worst"] = {m: max(((stats[m][s]["mean"], s) for s in done if stats[m][s]["mean"] is not None),
                                   default=(None, None)) for m in METRICS}
        lines.append(f"| **mean over {len(done)} folds** | " + " | ".join(
            "n/a" if numbers["mean"][m] is None else f"**{100 * numbers['mean'][m]:.2f}**" for m in METRICS) + " | |")
        lines.append("| worst fold | " + " | ".join(
            "n/a" if numbers["worst"][m][0] is None else f"{100 * numbers['worst'][m][0]:.2f} "
            f"({numbers['worst'][m][1]})" for m in METRICS) + " | |")
    return "\n".join(lines), numbers


def verdict(numbers: dict, speakers: tuple[str, ...]) -> list[str]:
    if "mean" not in numbers:
        return ["no fold finished"]
    out = []
    for m, name in (("speaker_ctc", "CTC one pass"), ("speaker_joint", "beam 5 + CTC 0.5")):
        worst, who = numbers["worst"][m]
        out.append(f"- {name}: {100 * numbers['mean'][m]:.2f}% digit errors on the speaker held out, the mean over "
                   f"{len(numbers['folds'])} of {len(speakers)} folds; the worst fold {who}, {100 * worst:.2f}%.")
    return out


def report(out: Path, config: SpeakersConfig, rows: list[dict], meta: dict) -> dict:
    """``speakers.md``, ``speakers.json`` and ``speakers.png`` from the rows."""
    from ..viz.speakers import speakers_figure

    out = Path(out)
    table, numbers = fold_table(rows, config.speakers)
    what = "tiny folds (a pipeline check; the numbers mean nothing)" if config.tiny else "the README's defaults"
    options = f" with `{config.train_options}`" if config.train_options else ""
    figure = speakers_figure(numbers, out / "speakers.png", seeds=config.seeds,
                             note=f"attnkit train asr --holdout-speaker NAME{options}" + (" (tiny)" if config.tiny
                                                                                           else ""))
    lines = ["# Leave one speaker out: speech recognition of a voice never heard", "", *run_notes(meta), "",
             f"Each fold: `attnkit train asr --holdout-speaker NAME --seed S`{options}, {what}; trained on every "
             "other speaker, scored on 1,000 utterances of the speaker held out (every recording of theirs) and on the "
             "recordings held out (the other speakers' test recordings), by its best dev checkpoint.", "",
             f"## Digit error rate (%), mean ± standard deviation over {seeds_text(config.seeds)}", "", table, "",
             *verdict(numbers, config.speakers), ""]
    md = out / "speakers.md"
    md.write_text("\n".join(lines), encoding="utf-8")
    (out / "speakers.json").write_text(json.dumps({"config": meta.get("config"), **numbers}, indent=1) + "\n",
                                       encoding="utf-8")
    return {"figure": figure, "markdown": md, "table": table, "verdict": verdict(numbers, config.speakers)}


def run(out, config: SpeakersConfig = SpeakersConfig(), *, command: str | None = None, workers: int = 1,
        threads: int | None = None, log: Callable[[str], None] = print, max_minutes: float | None = None,
        data_dir: Path | None = None) -> dict:
    """Every fold not yet in ``out/results.jsonl`` (``workers`` at a time, each training on ``threads`` threads),
    then ``report``: {"figure", "markdown", "table", "verdict"}."""
    folder = RunFolder(out, "speakers", config, command=command, log=log, max_minutes=max_minutes)
    threads = threads or 1
    jobs = [(folder.out, config, spk, seed, threads, data_dir) for seed in range(config.seeds)
            for spk in config.speakers if not folder.done("asr", spk, seed)]
    run_jobs(folder, jobs, _work, workers=workers, threads=1, describe=_describe,
             name=lambda job: fold_name(job[2], job[3]))
    meta = folder.finish({"workers": workers, "threads_per_fold": threads})
    return report(folder.out, config, folder.rows, meta)
