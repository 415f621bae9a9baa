"""What every command shares: a closed stdout pipe ends quietly; text that is not UTF-8 is a one-line error."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from attnkit.cli.main import main


def test_embed_into_a_closed_pipe_exits_quietly():
    """``attnkit embed ... | head -c 10``: the reader leaves after 10 bytes; no BrokenPipeError traceback."""
    texts = [f"sentence number {i} for the pipe" for i in range(40)]  # ~170 kB of JSON: more than a pipe holds
    p = subprocess.Popen([sys.executable, "-m", "attnkit.cli.main", "embed", "--threads", "1", *texts],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=300)
    assert head == b'{"text": "'
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
    assert p.returncode == 141  # 128 + SIGPIPE, as a shell reports for a tool stopped by a closed pipe


def test_broken_pipe_is_handled_for_every_command(monkeypatch, capsys):
    class Closed(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["lecture", "--out", "/nonexistent/never-written"]) == 141


def test_argument_bytes_that_are_not_utf8_are_named():
    r = subprocess.run([sys.executable, "-m", "attnkit.cli.main", "embed", "fine", b"caf\xe9"], capture_output=True)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err == "attnkit: error: embed: text 2 is not UTF-8 text (byte 0xe9 at character 4)\n", err


@pytest.mark.parametrize("argv,named", [
    (["embed", "\udcff"], "embed: text 1 is not UTF-8 text (byte 0xff at character 1)"),
    (["similarity", "fine", "x\udcfe"], "similarity: the second text is not UTF-8 text (byte 0xfe at character 2)"),
    (["attend", "ab\udcc3", "--no-plots"], "attend: the text is not UTF-8 text (byte 0xc3 at character 3)"),
])
def test_each_text_argument(argv, named, capsys):
    assert main(argv) == 1
    assert capsys.readouterr().err == f"attnkit: error: {named}\n"


def test_latin1_file_and_stdin_name_the_line(tmp_path, monkeypatch, capsys):
    f = tmp_path / "texts.txt"
    f.write_bytes("first line\ncaf\u00e9 au lait\n".encode("latin-1"))
    assert main(["embed", "--file", str(f)]) == 1
    assert capsys.readouterr().err == f"attnkit: error: {f}:2: not UTF-8 text (byte 0xe9 at column 4)\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\n\xff\n")))
    assert main(["embed", "--file", "-"]) == 1
    assert capsys.readouterr().err == "attnkit: error: <stdin>:2: not UTF-8 text (byte 0xff at column 1)\n"


def test_predict_names_the_input(tmp_path, capsys):
    assert main(["predict", str(tmp_path / "no-run"), "ok", "b\udce9"]) == 1
    assert capsys.readouterr().err == "attnkit: error: predict: input 2 is not UTF-8 text (byte 0xe9 at character 2)\n"


def test_positionals_may_follow_options():
    """Plain argparse ends a command's list of positionals at the first option and refuses what follows; every
    attnkit command takes them anywhere (commands with sub-commands, like ``train``, parse as before)."""
    from attnkit.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["translate", "runs/x", "--beam", "4", "Ein Hund.", "--dtype", "bfloat16", "Eine Katze."])
    assert str(args.checkpoint) == "runs/x" and args.texts == ["Ein Hund.", "Eine Katze."]
    assert args.beam == 4 and args.dtype == "bfloat16"
    args = parser.parse_args(["embed", "--batch-size", "8", "one", "two"])
    assert args.texts == ["one", "two"] and args.batch_size == 8
    with pytest.raises(SystemExit):
        parser.parse_args(["translate", "runs/x", "--no-such-option", "text"])
