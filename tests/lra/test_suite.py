"""LRA-lite on tiny sizes (a part of `attnkit lra run --quick`): cells train through attnkit's engine,
rows, tables and figures are written per seed, the same seed gives the same numbers, done cells are skipped."""

import json

import pytest
import torch

from attnkit.lra.cell import run_cell
from attnkit.lra.model import build_model
from attnkit.lra.report import accuracy_table, baselines, cells_table, common_tasks, read_results
from attnkit.lra.settings import SUITES, TASKS, TaskSettings, suite_settings
from attnkit.lra.suite import run_suite
from attnkit.lra.tasks import prepare_task

TINY = TaskSettings("listops", 60, 96, 16, 32, steps=6, batch_size=8, lr=2e-3, warmup_steps=2, d_model=16,
                    num_heads=2, d_ff=32, num_layers=1, pooling="first",
                    variant_options=SUITES["quick"]["listops"].variant_options)


@pytest.fixture(scope="module")
def listops_data(tmp_path_factory):
    return prepare_task(TINY, tmp_path_factory.mktemp("data"), seed=0)


def test_suite_rows_tables_figures_seeds_and_resume(tmp_path, monkeypatch, listops_data, one_thread):
    monkeypatch.setitem(SUITES["quick"], "listops", TINY)
    rows = run_suite(tmp_path, suite="quick", tasks=["listops"], variants=["full", "longformer", "performer"],
                     seeds=[0, 1], isolate=False)
    assert sorted((r["variant"], r["seed"]) for r in rows) == sorted(
        (v, s) for v in ("full", "longformer", "performer") for s in (0, 1))
    for r in rows:
        assert 0.0 <= r["test_accuracy"] <= 1.0 and r["steps"] == 6 and r["steps_per_s"] > 0
        assert r["command"].startswith("attnkit lra cell --task listops --variant ")
        assert f"--seed {r['seed']}" in r["command"] and r["dev_curve"][-1][0] == 6
        assert sum(n for _, n in r["by_depth"].values()) == 32  # every test expression, by its depth
    table = accuracy_table(rows)
    assert "| performer | no |" in table and "| full | yes |" in table and "36.37" in table
    full = sorted(100 * r["test_accuracy"] for r in rows if r["variant"] == "full")
    assert f"| full | yes | {sum(full) / 2:.1f} ({full[0]:.1f}-{full[1]:.1f}) |" in table  # mean (min-max)
    assert "| listops | longformer |" in cells_table(rows)
    floors = json.loads((tmp_path / "baselines.json").read_text())
    assert floors["listops"]["0"] == {**baselines(listops_data.train, listops_data.test, 10),
                                      "by_depth": floors["listops"]["0"]["by_depth"]}
    md = (tmp_path / "results.md").read_text()
    assert "| (rule) class given the first token | - | " in md and "| (chance) 1 / classes | - | 10.00 |" in md
    assert "by nesting depth" in md and "| (rule) class given the top operator |" in md
    assert (tmp_path / "lra.png").stat().st_size > 5000 and (tmp_path / "lra_curves.png").stat().st_size > 5000
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert set(timings["listops"]) == {"0", "1"}
    before = (tmp_path / "results.jsonl").read_text()
    run_suite(tmp_path, suite="quick", tasks=["listops"], variants=["full", "performer"], seeds=[1], isolate=False)
    assert (tmp_path / "results.jsonl").read_text() == before  # nothing re-run


def test_same_seed_same_numbers(tmp_path, listops_data, one_thread):
    a = run_cell("listops", "sparse", TINY, listops_data, tmp_path / "a", seed=3)
    b = run_cell("listops", "sparse", TINY, listops_data, tmp_path / "b", seed=3)
    assert a["test_accuracy"] == b["test_accuracy"] and a["best_dev_accuracy"] == b["best_dev_accuracy"]
    la = [json.loads(x)["loss"] for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
          if '"train"' in x]
    lb = [json.loads(x)["loss"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
          if '"train"' in x]
    assert la == lb and la


def test_models_share_everything_but_attention(listops_data):
    def size(v):
        return sum(p.numel() for p in build_model(TINY, v, listops_data.vocab_size, 10).parameters())

    sizes = {v: size(v) for v in ("full", "local", "linear", "nystrom", "performer")}
    assert len(set(sizes.values())) == 1  # only Linformer adds parameters (its projections)
    assert size("linformer") == sizes["full"] + 2 * TINY.num_layers * TINY.seq_len * 16


def test_quick_suite_settings_are_tiny_and_full_is_lra_sized():
    for task, s in SUITES["quick"].items():
        assert s.seq_len <= 256 and s.steps <= 50, task
    assert set(SUITES["quick"]) == set(SUITES["full"]) and set(TASKS) == set(SUITES["full"])
    full = suite_settings("full", "listops")
    assert full.seq_len == 2000 and full.pooling == "first" and not full.generator  # LRA's row as it was
    with pytest.raises(ValueError, match="unknown task 'retrieval' in the full suite"):
        suite_settings("full", "retrieval")
    with pytest.raises(ValueError, match="`pretrain_mask` must be in"):
        full.replace(pretrain_mask=1.0)
    with pytest.raises(ValueError, match="`task` must be one of"):
        full.replace(task="mqar-d32")


def test_pathfinder_and_image_tasks_load(tmp_path):
    s = SUITES["quick"]["pathfinder"].replace(n_train=8, n_val=2, n_test=2)
    data = prepare_task(s, tmp_path, seed=0)
    assert data.train[0][0].shape == (256,) and data.num_classes == 2 and data.vocab_size == 257
    assert int(data.train[0][0].min()) >= 1  # pixel value + 1: 0 stays padding
    img = SUITES["quick"]["image"].replace(n_train=8, n_val=2, n_test=4)
    try:
        mnist = prepare_task(img, tmp_path, seed=0)
    except FileNotFoundError:
        pytest.skip("MNIST is not in the data root here")
    assert mnist.train[0][0].shape == (100,) and len(mnist.test) == 4


def test_results_file_errors_name_the_line(tmp_path):
    (tmp_path / "results.jsonl").write_text('{"task": "listops", "variant": "full"}\nnot json\n')
    with pytest.raises(ValueError, match="results.jsonl:2"):
        read_results(tmp_path / "results.jsonl")
    (tmp_path / "results.jsonl").write_text('{"variant": "full"}\n')
    with pytest.raises(ValueError, match="results.jsonl:1: not a result row"):
        read_results(tmp_path / "results.jsonl")


def test_peak_memory_counts_what_the_work_holds():
    from attnkit.lra.memory import peak_memory

    result, mb = peak_memory(lambda: float(torch.ones(50_000_000).sum()))  # 200 MB held at once
    if mb is None:
        pytest.skip("no /proc/self/clear_refs here")
    assert result == 5e7 and 150 < mb < 400


def test_text_task_reads_imdb_bytes(tmp_path):
    from attnkit.lra.tasks import text_available
    from tests.data.test_imdb import _fake

    root = _fake(tmp_path / "imdb", n=6)
    assert text_available(root) and not text_available(tmp_path / "nothing")
    s = SUITES["quick"]["text"].replace(n_train=8, n_val=2, n_test=4)
    data = prepare_task(s, tmp_path, seed=0, imdb_dir=root)
    assert len(data.train) == 8 and len(data.val) == 2 and len(data.test) == 4 and data.num_classes == 2
    assert data.train[0][0].tolist() == [b + 1 for b in "pos review 0 é".encode()]
    with pytest.raises(ValueError, match="IMDb has 12 training"):
        prepare_task(s.replace(n_train=20), tmp_path, seed=0, imdb_dir=root)


def test_baselines_count_the_labels_and_the_first_token():
    t = torch.tensor
    train = [(t([1, 5]), 0), (t([1, 6]), 0), (t([2, 5]), 3), (t([2, 7]), 3), (t([2, 7]), 1), (t([3, 4]), 0)]
    test = [(t([1, 9]), 0), (t([2, 9]), 3), (t([2, 9]), 0), (t([4, 9]), 0), (t([3, 9]), 1)]
    # majority class 0: right on 3 of 5; first token 1 -> 0, 2 -> 3, 3 -> 0, unseen 4 -> majority 0: 3 of 5
    assert baselines(train, test, 4) == {"majority": 3 / 5, "first_token": 3 / 5, "chance": 0.25}
    test[2] = (t([2, 9]), 3)
    assert baselines(train, test) == {"majority": 2 / 5, "first_token": 4 / 5, "chance": None}
    table = accuracy_table([{"task": "listops", "variant": "full", "seed": 0, "test_accuracy": 0.5}],
                           {"listops": {"0": {"majority": 0.2, "first_token": 0.375, "chance": 0.1},
                                        "1": {"majority": 0.3, "first_token": 0.425, "chance": 0.1}}})
    assert "| (rule) majority class | - | 25.00 | - |" in table  # the mean over the seeds' data
    assert "| (rule) class given the first token | - | 40.00 | - |" in table
    with pytest.raises(ValueError, match="non-empty"):
        baselines([], test)


def test_baselines_of_per_position_targets():
    t = torch.tensor
    train = [(t([5, 6, 7]), t([-100, 2, 2])), (t([5, 6, 7]), t([1, -100, 2]))]
    test = [(t([5, 6, 7]), t([2, 1, -100])), (t([5, 6, 7]), t([-100, -100, 2]))]
    assert baselines(train, test, 8) == {"majority": 2 / 3, "first_token": None, "chance": 1 / 8}


def test_common_tasks_are_those_every_variant_ran():
    rows = [{"task": "mqar", "variant": v, "seed": 0} for v in ("full", "linear", "local")]
    rows += [{"task": "image", "variant": v, "seed": 0} for v in ("full", "linear")]  # no local cell
    rows += [{"task": "listops-short", "variant": v, "seed": s} for v in ("full", "linear", "local") for s in (0, 1)]
    assert common_tasks(rows) == ["listops-short", "mqar"]  # the suites' order; image lacks local
    assert common_tasks(rows[3:5]) == ["image"]


def test_generate_mqar_defaults_are_the_suites_data():
    from attnkit.data.mqar import MQARConfig
    from attnkit.lra.tasks import mqar_config

    for task in ("mqar", "mqar-d128"):  # `attnkit lra generate mqar --seed 0` writes the cells' data
        assert mqar_config(suite_settings("full", task), 0) == MQARConfig(seed=0)
