"""`attnkit evaluate` of a translation run shows its progress as `translate` does (--progress / --no-progress;
by default only when stderr is a terminal)."""

from attnkit.cli.main import main
from tests.pretrained.translation_run import make_run, texts


def test_evaluate_of_a_translation_run_counts_the_texts(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    pairs = texts(6, seed=3)
    (tmp_path / "src").write_text("\n".join(p[0] for p in pairs) + "\n", encoding="utf-8")
    (tmp_path / "ref").write_text("\n".join(p[1] for p in pairs) + "\n", encoding="utf-8")
    argv = ["evaluate", str(run), "--data", str(tmp_path / "src"), "--ref", str(tmp_path / "ref"), "--beam", "1",
            "--max-new-tokens", "5", "--threads", "1"]
    assert main([*argv, "--progress"]) == 0
    cap = capsys.readouterr()
    assert "translate: 100%" in cap.err and "6/6" in cap.err and "BLEU" in cap.out
    assert main([*argv, "--no-progress"]) == 0
    assert "translate:" not in capsys.readouterr().err
    assert main(argv) == 0  # stderr is not a terminal here: no bar
    assert "translate:" not in capsys.readouterr().err
