"""What a training run prints: plain text in a log, whole lines under a progress bar in a terminal."""

import os
import re
import subprocess
import sys

import pytest

from attnkit.cli.main import main
from attnkit.train import progress

ARGS = ["train", "image", "--dataset", "digits", "--max-steps", "30", "--eval-every", "10", "--log-every", "5",
        "--batch-size", "16", "--d-model", "16", "--num-heads", "2", "--d-ff", "32", "--num-encoder-layers", "1",
        "--threads", "1"]
DEV_LINE = re.compile(r"^step (10|20|30)/30  dev accuracy \d\.\d{4}  loss \d+\.\d{4}(  \(best so far\))?$")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "120", "LINES": "30"}


def _cli(args, **kw):
    return [sys.executable, "-m", "attnkit.cli.main", *args]


def test_piped_log_is_plain_text_with_whole_lines(tmp_path):
    r = subprocess.run(_cli([*ARGS, "--out", str(tmp_path / "run")]), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=ENV, timeout=300)
    log = r.stdout.decode()
    assert r.returncode == 0, log[-3000:]
    assert "\r" not in log and "\x1b" not in log  # no bar redraws, no cursor movement
    lines = log.splitlines()
    assert sum(bool(DEV_LINE.match(line)) for line in lines) == 3, log
    assert re.search(r"^step 5/30  loss \d\.\d{4}  \d+ items/s  lr \d\.\de-0\d  \(\d+:\d\d in, about \d+:\d\d left\)$",
                     log, re.M)  # a plain progress line
    assert re.search(r"^step 30/30  loss ", log, re.M)  # and the last step's
    summary = "\n".join(lines[-5:])
    assert re.search(r"best dev accuracy: \d\.\d{4} at step (10|20|30)", log)
    assert f"curves: {tmp_path / 'run' / 'curves.png'}" in summary and "test accuracy:" in summary


def _run_in_pty(argv, timeout=300) -> str:
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env={**ENV, "TERM": "xterm"}, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert p.wait(timeout=timeout) == 0, b"".join(chunks).decode(errors="replace")[-3000:]
    return b"".join(chunks).decode(errors="replace")


def test_terminal_shows_one_bar_and_keeps_dev_lines_whole(tmp_path):
    out = _run_in_pty(_cli([*ARGS, "--out", str(tmp_path / "run")]))
    assert "\r" in out and "train image:" in out  # a bar was drawn (and redrawn)
    assert "items/s" in out and not re.search(r"\d(it/s|s/it)", out)  # one rate: tqdm's own is not shown
    # every dev line arrives whole: nothing of the bar inside it, on a line of its own
    segments = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", s).strip() for s in re.split(r"[\r\n]", out)]
    dev = [s for s in segments if "dev accuracy" in s and not s.startswith(("best", "last"))]
    assert len(dev) == 3 and all(DEV_LINE.match(s) for s in dev), dev
    assert not re.search(r"^step \d+/30  loss", out, re.M)  # no plain progress lines beside the bar


def test_no_progress_keeps_dev_lines_and_summary(tmp_path, capsys):
    assert main([*ARGS, "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert sum(bool(DEV_LINE.match(line)) for line in lines) == 3
    assert "\r" not in captured.err + captured.out and "best dev accuracy:" in captured.out


@pytest.mark.parametrize("flag,tty,want", [(None, True, True), (None, False, False), (True, False, True),
                                           (False, True, False)])
def test_bars_follow_the_terminal_unless_told(monkeypatch, flag, tty, want):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
    assert progress.bars_wanted(flag) is want


def test_plain_lines_are_throttled(monkeypatch, capsys):
    now = [0.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    p = progress.Progress(100, 0, "x", bars=False)
    rec = {"loss": 0.5, "items_per_s": 1000.0, "lr": 1e-3}
    for step in range(1, 101):
        now[0] += 1.0  # one second per step
        p.step(step, rec if step % 5 == 0 else None)
    printed = [int(line.split()[1].split("/")[0]) for line in capsys.readouterr().out.splitlines()]
    assert printed == [5, 15, 25, 35, 45, 55, 65, 75, 85, 95, 100]  # first, then every >= 10 s, and the last
