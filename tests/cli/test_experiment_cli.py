"""``attnkit experiment {data-size,rnn,positions}`` from the command line: --quick with tiny overrides, the
table and files it reports, and one-line errors for bad input."""

import json
import re

import pytest

from attnkit.cli.main import main


def test_positions_quick_prints_the_table_and_writes_the_files(tmp_path, capsys, one_thread):
    out = tmp_path / "pos"
    argv = ["experiment", "positions", "--quick", "--out", str(out), "--threads", "1", "--encodings", "rope,learned",
            "--steps", "2", "--test-lengths", "16,24"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "attnkit experiment positions (quick): 1 process(es) of 1 torch thread(s)" in text
    assert "| test length | RoPE | learned |" in text and "| 24 | " in text
    assert f"wrote {out / 'positions.png'}, {out / 'positions.md'} and {out / 'results.jsonl'}" in text
    meta = json.loads((out / "run.json").read_text())
    assert meta["config"]["steps"] == 2 and meta["config"]["d_model"] == 16  # given, and --quick's
    assert len((out / "results.jsonl").read_text().splitlines()) == 2 * 2 * 2
    assert main([*argv[:-2], "--test-lengths", "16,32"]) == 1  # another config into the same folder
    assert "holds results of another experiment or config" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["rnn", "--lengths", "16,x"], "argument --lengths: comma-separated whole numbers, each an integer in "
                                   "[0, 2147483647], expected, got '16,x'"),
    (["rnn", "--models", "gru,mamba"], "argument --models: 'mamba' is not one of gru, lstm, self-attention"),
    (["data-size", "--side", "20"], "argument --side: invalid choice"),
    (["positions", "--steps", "0"], "argument --steps: must be an integer in [1, 1000000], got '0'"),
    (["rnn", "--lengths", "8,8"], "argument --lengths: 8 is given twice in '8,8'; give each value once"),
    (["rnn", "--lengths", "8,16,08"], "argument --lengths: 8 is given twice in '8,16,08'"),
    (["positions", "--encodings", "none,none"], "argument --encodings: 'none' is given twice in 'none,none'"),
    (["rnn", "--lengths", ",".join(["8"] * 10000)], "argument --lengths: 8 is given twice"),
    (["data-size", "--models", "cnn,cnn"], "argument --models: 'cnn' is given twice"),
])
def test_bad_options_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(["experiment", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_bad_settings_together_are_one_line(tmp_path, capsys):
    assert main(["experiment", "positions", "--quick", "--out", str(tmp_path), "--min-train-length", "40"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "attnkit: error: PositionsConfig: `min_train_length` 40 > `train_length` 16"
    assert not (tmp_path / "results.jsonl").exists()


def test_help_gives_both_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["experiment", "data-size", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 300,1000,3000,10000,30000,55000; --quick: 100,300; comma-separated)" in text
    assert "--jobs JOBS" in text and "--window-patch WINDOW_PATCH" in text


def test_repeated_values_are_refused_by_the_configs_too():
    """Issue 65, item 3: a repeated length or encoding ran the same models again and appended their rows again."""
    from attnkit.experiments.data_size import DataSizeConfig
    from attnkit.experiments.positions import PositionsConfig
    from attnkit.experiments.rnn import RnnConfig

    for make, words in ((lambda: RnnConfig(lengths=(8, 8)), "RnnConfig: `lengths` holds 8 twice"),
                        (lambda: RnnConfig(timing_lengths=(16, 32, 16)), "RnnConfig: `timing_lengths` holds 16 twice"),
                        (lambda: PositionsConfig(encodings=("none", "none")), "`encodings` holds 'none' twice"),
                        (lambda: DataSizeConfig(sizes=(300, 300)), "DataSizeConfig: `sizes` holds 300 twice")):
        with pytest.raises(ValueError, match=re.escape(words)):
            make()
