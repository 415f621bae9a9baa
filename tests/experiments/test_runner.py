"""The experiments' shared runner: the step-bounded loop is reproducible, results.jsonl resumes and refuses another
config, means and spreads are the sample statistics, the table shows them."""

import json
from concurrent.futures import FIRST_COMPLETED, Future
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from attnkit.experiments.runner import RunFolder, accuracy, mean_table, run_jobs, run_notes, summarize, train_steps


@dataclass(frozen=True)
class Cfg:
    size: int = 3


def _data(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(16, 4, generator=g)
    return (x,), (x[:, 0] > 0).long()


def test_train_steps_learns_and_repeats_bitwise():
    runs = []
    for _ in range(2):
        torch.manual_seed(123)  # train_steps seeds itself: the model's start is the caller's
        model = nn.Linear(4, 2)
        times = train_steps(model, _data, 60, lr=0.05, warmup=5, seed=7)
        runs.append(torch.cat([p.flatten() for p in model.parameters()]))
        assert len(times) == 60 and all(t > 0 for t in times) and not model.training
    assert torch.equal(runs[0], runs[1])
    assert accuracy(model, [_data(1000 + i) for i in range(4)]) > 0.9


def test_train_steps_stops_on_a_nan_loss():
    model = nn.Linear(4, 2)
    with torch.no_grad():
        model.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="diverged at step 0"):
        train_steps(model, _data, 3, lr=0.1)


def test_accuracy_skips_ignored_targets():
    model = nn.Identity()
    logits = torch.tensor([[[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]]])  # arg-max 0, 1, 0
    assert accuracy(model, [((logits,), torch.tensor([[0, 0, -100]]))]) == 0.5


def test_run_folder_resumes_and_refuses_another_config(tmp_path):
    f = RunFolder(tmp_path, "demo", Cfg(), command="attnkit experiment demo", log=lambda s: None)
    f.add({"model": "a", "x": 10, "seed": 0, "test_accuracy": 0.5})
    meta = f.finish()
    assert meta["command"] == "attnkit experiment demo" and meta["wall_seconds"] >= 0
    assert meta["machine_at_end"]["torch_threads"] >= 1 and meta["config"] == {"size": 3}
    said = []
    again = RunFolder(tmp_path, "demo", Cfg(), log=said.append)
    assert again.done("a", 10, 0)["test_accuracy"] == 0.5 and again.done("a", 10, 1) is None
    assert said == [f"1 results already in {tmp_path / 'results.jsonl'}: those runs are skipped"]
    assert json.loads((tmp_path / "run.json").read_text())["resumed_rows"] == 1
    with pytest.raises(ValueError, match="holds results of another experiment or config"):
        RunFolder(tmp_path, "demo", Cfg(size=4))
    with pytest.raises(ValueError, match="another experiment"):
        RunFolder(tmp_path, "other", Cfg())


def test_summaries_and_table():
    rows = [{"model": m, "x": x, "seed": s, "acc": v} for m, x, s, v in
            [("cnn", 100, 0, 0.5), ("cnn", 100, 1, 0.7), ("cnn", 100, 2, 0.6), ("vit", 100, 0, None),
             ("vit", 100, 1, 0.4), ("cnn", 1000, 0, 0.9)]]
    s = {(r["model"], r["x"]): r for r in summarize(rows, "acc")}
    assert s[("cnn", 100)]["mean"] == pytest.approx(0.6) and s[("cnn", 100)]["std"] == pytest.approx(0.1)
    assert s[("vit", 100)]["n"] == 1 and s[("vit", 100)]["missing"] == 1 and s[("vit", 100)]["std"] == 0.0
    table = mean_table(list(s.values()), ["cnn", "vit"], "images", names={"cnn": "CNN"})
    assert table.splitlines() == ["| images | CNN | vit |", "| ---: | ---: | ---: |",
                                  "| 100 | 60.0 ± 10.0 | 40.0 ± 0.0 |", "| 1000 | 90.0 ± 0.0 | n/a |"]


def test_run_notes_say_how_the_numbers_were_made():
    start = {"cpu": "x86_64", "cores": 2, "torch_threads": 2, "torch": "2.x", "load_average": "0.10, 0.20, 0.30",
             "date": "2026-01-01 00:00:00", "native_kernels": "the CPU has no AVX-512"}
    notes = run_notes({"command": "attnkit experiment rnn", "wall_seconds": 90, "resumed_rows": 0,
                       "machine_at_start": start, "machine_at_end": {**start, "load_average": "1.00, 1.00, 1.00"}})
    text = "\n".join(notes)
    assert "`attnkit experiment rnn`" in text and "1.5 min" in text and "0.10, 0.20, 0.30 at the start" in text
    assert "1.00, 1.00, 1.00 at the end" in text and "native kernels do not run here (the CPU has no AVX-512)" in text


@dataclass(frozen=True)
class Seeded:
    size: int = 3
    seeds: int = 1


def test_run_folder_adds_seeds_one_group_at_a_time(tmp_path):
    first = RunFolder(tmp_path, "demo", Seeded(seeds=1), command="attnkit experiment demo --seeds 1", log=print)
    first.add({"model": "a", "x": 10, "seed": 0, "test_accuracy": 0.5})
    first.finish()
    more = RunFolder(tmp_path, "demo", Seeded(seeds=3), command="attnkit experiment demo --seeds 3", log=print)
    assert more.done("a", 10, 0)["test_accuracy"] == 0.5 and more.done("a", 10, 1) is None
    more.add({"model": "a", "x": 10, "seed": 1, "test_accuracy": 0.7})
    meta = more.finish()
    assert [r["command"] for r in meta["earlier_runs"]] == ["attnkit experiment demo --seeds 1"]
    assert meta["earlier_runs"][0]["seeds"] == 1 and meta["earlier_runs"][0]["wall_seconds"] >= 0
    assert "Earlier run into the same folder: `attnkit experiment demo --seeds 1` (1 seed(s), 0.0 min" in \
        "\n".join(run_notes(meta))
    fewer = RunFolder(tmp_path, "demo", Seeded(seeds=1), log=print)  # reports only its own seeds' rows
    assert [r["seed"] for r in fewer.rows] == [0]
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 2
    with pytest.raises(ValueError, match="another experiment or config"):
        RunFolder(tmp_path, "demo", Seeded(size=4, seeds=3))


def test_run_jobs_starts_nothing_once_out_of_time(tmp_path):
    folder = RunFolder(tmp_path, "demo", Seeded(seeds=1), log=lambda s: None, max_minutes=5)
    checks = iter([False, False, True])
    folder.out_of_time = lambda: next(checks)  # the limit passes after two jobs
    rows = run_jobs(folder, [(1,), (2,), (3,), (4,)], lambda job: [{"model": "a", "x": job[0], "seed": 0}])
    assert [r["x"] for r in rows] == [1, 2] and folder.jobs_left == 2
    meta = folder.finish()
    assert meta["jobs_left"] == 2 and meta["max_minutes"] == 5
    assert "- Incomplete: stopped after --max-minutes 5 with 2 run(s) still to make; the same command again adds " \
           "them." in run_notes(meta)
    assert not RunFolder(tmp_path / "b", "demo", Seeded(), max_minutes=1).out_of_time()
    assert not RunFolder(tmp_path / "c", "demo", Seeded()).out_of_time()


class FakePool:
    """Worker processes on a fake clock: a job ``(name, seconds)`` takes that long from when it is handed out."""

    def __init__(self, clock):
        self.clock, self.due, self.most = clock, {}, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, work, job):
        future = Future()
        self.due[future] = (self.clock.now + job[1], work, job)
        self.most = max(self.most, sum(not f.done() for f in self.due))
        return future

    def wait(self, futures, timeout, return_when):
        """The next job's end, or ``timeout`` seconds on, whichever comes first."""
        assert return_when == FIRST_COMPLETED
        self.clock.now = min(min(self.due[f][0] for f in futures), self.clock.now + timeout)
        done = {f for f in futures if self.due[f][0] <= self.clock.now}
        for f in done:
            _, work, job = self.due[f]
            f.set_result(work(job))
        return done, set(futures) - done


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_run_jobs_in_workers_says_what_is_under_way_every_10_s(tmp_path, monkeypatch):
    """``--jobs 2``: jobs handed to a worker as one comes free, and while they run, this process logs which are
    under way, how many are done and the time left, never 10 s of the (fake) clock without a line."""
    from attnkit.experiments import runner
    from attnkit.train import progress

    clock = Clock()
    monkeypatch.setattr(progress, "clock", clock)
    pool = FakePool(clock)
    monkeypatch.setattr(runner, "worker_pool", lambda workers, threads: pool)
    monkeypatch.setattr(runner, "wait", pool.wait)
    said = []
    folder = RunFolder(tmp_path, "demo", Cfg(), log=lambda line: said.append((clock.now, line)))
    jobs = [("a", 25.0), ("b", 12.0), ("c", 30.0), ("d", 5.0)]
    rows = run_jobs(folder, jobs, lambda job: [{"model": job[0], "x": job[1], "seed": 0}], workers=2,
                    describe=lambda row: f"  {row['model']} done", name=lambda job: f"run {job[0]}")
    assert [r["model"] for r in rows] == ["b", "a", "d", "c"] and folder.jobs_left == 0
    assert pool.most == 2 and clock.now == 42.0  # a, b from 0; c from 12 (b done); d from 25 (a done): c ends at 42
    times = [0.0] + [t for t, _ in said] + [clock.now]
    assert max(b - a for a, b in zip(times, times[1:])) <= progress.PLAIN_EVERY, said
    assert said == [(9.5, "  under way: run a (0:10); run b (0:10)  [0/4 runs, 0:10 in]"),
                    (12.0, "  b done  [1/4 runs, 0:12 in, about 0:36 left]"),
                    (21.5, "  under way: run a (0:22); run c (0:10)  [1/4 runs, 0:22 in, about 1:04 left]"),
                    (25.0, "  a done  [2/4 runs, 0:25 in, about 0:25 left]"),
                    (30.0, "  d done  [3/4 runs, 0:30 in, about 0:10 left]"),
                    (39.5, "  under way: run c (0:28)  [3/4 runs, 0:40 in, about 0:13 left]"),
                    (42.0, "  c done  [4/4 runs, 0:42 in, about 0:00 left]")]


def _as_rows(job: tuple) -> list[dict]:
    return list(job)


def test_run_jobs_in_real_worker_processes(tmp_path):
    """The same in spawned processes: every job's rows, each job run once."""
    folder = RunFolder(tmp_path, "demo", Cfg(), log=lambda line: None)
    jobs = [({"model": m, "x": 1, "seed": 0},) for m in "abc"]
    rows = run_jobs(folder, jobs, _as_rows, workers=2, threads=1)
    assert sorted(r["model"] for r in rows) == ["a", "b", "c"] and folder.jobs_left == 0
