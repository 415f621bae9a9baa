"""The experiments' scaffold: the shared config checks say which field is wrong, ``measure`` runs only the jobs
whose rows the folder lacks, ``results`` summarises the rows a report starts from."""

import json
from dataclasses import dataclass

import pytest

from attnkit.experiments.scaffold import check, lr_field, measure, results, seeds_field, trained_field


@dataclass(frozen=True)
class Cfg:
    models: tuple[str, ...] = trained_field(("a", "b"))
    seeds: int = seeds_field("data")
    lengths: tuple[int, ...] = (4, 8)
    lr: float = lr_field(1e-3, " for a")
    d_model: int = 8

    def __post_init__(self):
        check(self, whole={"lengths": (2, 16)}, choices={"models": ("a", "b")}, heads=4)


@pytest.mark.parametrize("changes, message", [
    ({"models": ("a", "c")}, "Cfg: `models` must be some of ('a', 'b'), got ('a', 'c')"),
    ({"models": ()}, "Cfg: `models` must be some of ('a', 'b'), got ()"),
    ({"lengths": (4, 17)}, "Cfg: `lengths` must be whole numbers in [2, 16], got (4, 17)"),
    ({"lengths": (4, 4)}, "Cfg: `lengths` holds 4 twice"),
    ({"models": ("b", "b")}, "Cfg: `models` holds 'b' twice"),
    ({"d_model": 6}, "Cfg: `d_model` must be a multiple of the 4 heads, got 6"),
    ({"seeds": 0}, "Cfg: `seeds`"),
    ({"lr": 0.0}, "Cfg: `lr`"),
])
def test_check_names_the_field(changes, message):
    with pytest.raises(ValueError) as e:
        Cfg(**changes)
    assert str(e.value).startswith(message)


def test_the_fields_document_themselves():
    from dataclasses import fields

    meta = {f.name: f.metadata for f in fields(Cfg)}
    assert meta["models"]["choices"] == ("a", "b") and meta["models"]["help"] == "the models to train"
    assert meta["seeds"]["help"] == "seeds per point (0, 1, ...): data" and Cfg().seeds == 3
    assert meta["lr"]["help"] == "AdamW's peak learning rate for a" and Cfg().lr == 1e-3


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
