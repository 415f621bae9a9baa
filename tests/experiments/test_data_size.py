"""The data-size experiment on tiny sizes: parameter-matched models, the pixel model's window on the local
backend, the step budget, and the whole pipeline (rows, table, figure, resume) on stand-in images."""

import json

import pytest
import torch

from attnkit.experiments import data_size as D

TINY = D.DataSizeConfig(sizes=(20, 40), seeds=2, d_model=8, layers=1, batch_size=10, epochs=1.0, min_steps=2,
                        max_steps=3, test_images=30, dev_images=20)


def fake_images(side=14, n=100):
    g = torch.Generator().manual_seed(0)
    y = torch.arange(n) % 10
    x = torch.randn(n, 1, side, side, generator=g) + y.view(-1, 1, 1, 1) * 0.3  # a little signal
    return {"train": (x, y), "dev": (x[:40], y[:40]), "test": (x[40:], y[40:])}


def test_models_are_parameter_matched_at_the_defaults():
    cfg = D.DataSizeConfig()
    n = {m: D.param_count(D.build_model(cfg, m)) for m in D.MODELS}
    assert n == {"cnn": 70338, "vit": 71306, "window": 71178}
    assert max(n.values()) / min(n.values()) < 1.02
    assert D.param_count(D.build_model(D.DataSizeConfig(window_patch=1), "window")) == 80394  # pixels: 196 positions
    x = torch.randn(3, 1, 14, 14)
    for m in D.MODELS:
        assert D.build_model(cfg, m)(x).shape == (3, 10)


@pytest.mark.parametrize("patch", [1, 2])
def test_window_model_sees_only_its_window_on_the_local_backend(monkeypatch, patch):
    """A token's output changes with a token inside its band (grid width + 1 keys each side), not outside it."""
    import attnkit.nn.attention as mha

    cfg = D.DataSizeConfig(d_model=8, layers=1, dropout=0.0, window_patch=patch)
    model = D.build_model(cfg, "window").eval()
    backends, real = [], mha.attention
    monkeypatch.setattr(mha, "attention", lambda *a, **k: backends.append(k["backend"]) or real(*a, **k))
    outputs = []
    model.head = torch.nn.Identity()  # the mean over pixels would mix them: look at every pixel's output
    model.encoder.register_forward_hook(lambda mod, inp, out: outputs.append(out.last_hidden_state))
    with torch.no_grad():
        x = torch.randn(1, 1, 14, 14)
        model(x)
        x[0, 0, 7, 2] += 5.0  # pixel row 7, column 2: token 7 * 14 + 2 = 100, or patch 3 * 7 + 1 = 22
        model(x)
    changed = (outputs[1] - outputs[0]).abs().amax(-1)[0] > 1e-6
    token, width = (100, 14) if patch == 1 else (22, 7)
    assert cfg.keys_each_side == width + 1 and backends == ["local", "local"]
    assert changed.nonzero().flatten().tolist() == list(range(token - width - 1, token + width + 2))


def test_budget_clamps_epochs_to_the_step_range():
    cfg = D.DataSizeConfig()
    assert [D.steps_for(cfg, n) for n in cfg.sizes] == [200, 313, 400, 400, 400, 400]
    with pytest.raises(ValueError, match="sizes"):
        D.DataSizeConfig(sizes=(5,))
    with pytest.raises(ValueError, match="min_steps"):
        D.DataSizeConfig(min_steps=10, max_steps=5)
    with pytest.raises(ValueError, match="models"):
        D.DataSizeConfig(models=("mlp",))


def test_pipeline_rows_table_figure_resume(tmp_path, monkeypatch, one_thread):
    monkeypatch.setattr(D, "load_images", lambda side, data_dir=None: fake_images(side))
    res = D.run(tmp_path, TINY, command="attnkit experiment data-size --quick", log=lambda s: None)
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 2 * 3 and {r["model"] for r in rows} == set(D.MODELS)
    assert {(r["x"], r["steps"]) for r in rows} == {(20, 2), (40, 3)}
    assert all(0 <= r["test_accuracy"] <= 1 and r["epochs"] > 0 for r in rows)
    md = (tmp_path / "data_size.md").read_text()
    assert "| training images | CNN | ViT | self-attention in a 3x3 window |" in md
    assert "`attnkit experiment data-size --quick`" in md and "20: 2, 40: 3" in md
    assert res["verdict"][0].startswith("- CNN minus ViT: ") and " points at 20 images, " in res["verdict"][0]
    assert "## The CNN's lead (accuracy points), mean ± standard deviation of the per-seed difference" in md
    assert (tmp_path / "data_size.png").stat().st_size > 20_000
    before = (tmp_path / "results.jsonl").read_text()
    D.run(tmp_path, TINY, log=lambda s: None)
    assert (tmp_path / "results.jsonl").read_text() == before  # nothing re-run


def test_same_seed_same_numbers(one_thread):
    images = fake_images()
    a = D.run_one(TINY, images, "vit", 20, seed=1)
    b = D.run_one(TINY, images, "vit", 20, seed=1)
    c = D.run_one(TINY, images, "vit", 20, seed=0)
    keep = ("test_accuracy", "dev_accuracy", "steps", "params")
    assert {k: a[k] for k in keep} == {k: b[k] for k in keep}
    assert a["seed"] != c["seed"]


def test_mnist_at_14_pixels():
    try:
        images = D.load_images(14)
    except FileNotFoundError:
        pytest.skip("MNIST is not in the datasets root (set ATTNKIT_DATA)")
    assert {k: tuple(v[0].shape) for k, v in images.items()} == {
        "train": (55000, 1, 14, 14), "dev": (5000, 1, 14, 14), "test": (10000, 1, 14, 14)}
    assert images["test"][1][:5].tolist() == [7, 2, 1, 0, 4]


def test_leads_pair_seeds_and_the_verdict_reads_them():
    acc = {("cnn", 300): (0.90, 0.92), ("vit", 300): (0.70, 0.76), ("cnn", 3000): (0.95, 0.97),
           ("vit", 3000): (0.96, 0.99)}
    rows = [{"model": m, "x": n, "seed": s, "test_accuracy": a[s]} for (m, n), a in acc.items() for s in (0, 1)]
    rows.append({"model": "vit", "x": 300, "seed": 2, "test_accuracy": 0.1})  # no CNN of seed 2: left out
    lead = {(s["model"], s["x"]): s for s in D.leads(rows, ("cnn", "vit"))}
    assert set(lead) == {("vit", 300), ("vit", 3000)}
    assert lead[("vit", 300)]["mean"] == pytest.approx(0.18) and lead[("vit", 300)]["n"] == 2
    assert lead[("vit", 300)]["std"] == pytest.approx(0.02 * 2 ** 0.5)  # differences 0.20 and 0.16
    assert lead[("vit", 3000)]["mean"] == pytest.approx(-0.015)
    assert D.verdict(list(lead.values()), ("cnn", "vit")) == [
        "- CNN minus ViT: +18.0 ± 2.8 points at 300 images, -1.5 ± 0.7 at 3,000 (smallest, -1.5, at 3,000): the gap "
        "narrows; the ViT is ahead at 3,000 images."]
