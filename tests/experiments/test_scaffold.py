"""The experiments' run scaffold: ``measure`` runs only the jobs whose rows the folder lacks, ``results``
summarises the rows a report starts from."""

import json
from dataclasses import dataclass

import pytest

from attnkit.experiments.scaffold import measure, results


@dataclass(frozen=True)
class Cfg:
    models: tuple[str, ...] = ("a", "b")
    lengths: tuple[int, ...] = (4, 8)


def _work(job):
    model, x, seed = job
    return [{"model": model, "x": x, "seed": seed, "test_accuracy": 0.5 + seed / 10, "dev_accuracy": 0.5,
             "params": 10 * x}]


def test_measure_runs_only_the_jobs_not_done_and_results_summarise_them(tmp_path):
    cfg = Cfg()
    everything = [(m, x, s) for m in cfg.models for x in cfg.lengths for s in range(2)]
    ran = []

    def jobs(folder):
        todo = [j for j in everything if not folder.done(*j)]
        ran.append(len(todo))
        return todo

    kw = dict(command="test", workers=1, threads=None, log=lambda s: None, max_minutes=None)
    first = measure(tmp_path, "toy", cfg, lambda folder: jobs(folder)[:3], _work, str, **kw)
    assert len(first.rows) == 3 and len((tmp_path / "results.jsonl").read_text().splitlines()) == 3
    again = measure(tmp_path, "toy", cfg, jobs, _work, str, **kw)
    assert ran == [8, 5] and len(again.rows) == 8  # the 3 rows kept, the 5 others run
    assert json.loads((tmp_path / "run.json").read_text())["resumed_rows"] == 3
    res = results(again.rows, ("b", "a", "c"))
    assert res.present == ("b", "a") and res.params == {"b": 80, "a": 80}
    cell = next(s for s in res.test if (s["model"], s["x"]) == ("a", 4))
    assert cell["n"] == 2 and cell["mean"] == pytest.approx(0.55) and cell["std"] == pytest.approx(0.0707107, 1e-5)
