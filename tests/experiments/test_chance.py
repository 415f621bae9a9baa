"""A quick run at chance says so: the chance level, the models within noise of it, and the command that answers."""

from __future__ import annotations

from attnkit.cli.main import main
from attnkit.experiments.positions import FULL
from attnkit.experiments.runner import chance_note


def point(model, x, mean, std, n=2):
    return {"model": model, "x": x, "mean": mean, "std": std, "n": n}


def test_chance_note_names_the_models_within_noise():
    # 240 tokens per seed, 2 seeds: a guesser's standard error at 1/16 is 1.1 points, two of them 2.2
    summary = [point("a", 16, 0.077, 0.021), point("a", 32, 0.075, 0.006), point("b", 16, 0.10, 0.003),
               point("b", 32, 0.99, 0.0)]
    lines = chance_note(summary, chance=1 / 16, samples=lambda n: 240, real="X", names={"a": "A"})
    assert lines == ["chance: 6.2%; within noise of it: A"]
    lines = chance_note(summary[:2], chance=1 / 16, samples=lambda n: 240, real="run X (9 min)")
    assert lines == ["chance: 6.2%; within noise of it: a", "every result here is at chance: these sizes check "
                     "the pipeline, not the claim. A real answer: run X (9 min)"]
    # 0.10 is 3.75 points above chance: outside 2 standard errors of 240 tokens, inside those of 24
    assert chance_note([point("b", 16, 0.10, 0.0)], chance=1 / 16, samples=lambda n: 24, real="X")[0] == \
        "chance: 6.2%; within noise of it: b"
    assert chance_note([point("b", 16, 0.10, 0.0)], chance=1 / 16, samples=lambda n: 240, real="X") == \
        ["chance: 6.2%"]


def test_quick_positions_prints_chance_and_the_real_command(tmp_path, capsys, one_thread):
    argv = ["experiment", "positions", "--quick", "--out", str(tmp_path / "q"), "--threads", "1", "--encodings",
            "none", "--seeds", "1", "--steps", "2"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "\nchance: 6.2%; within noise of it: none\n" in text
    assert f"every result here is at chance: these sizes check the pipeline, not the claim. A real answer: {FULL}" \
        in text
    assert FULL.startswith("attnkit experiment positions ") and "min on a 2-core" in FULL
