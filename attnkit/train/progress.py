"""What a training run prints: a progress bar on a terminal, plain lines in a log.

- Bars (tqdm, on stderr) only when stderr is a terminal, unless ``progress`` says otherwise
  (``--progress`` / ``--no-progress``). A bar shows one rate: items per second (tokens, images,
  nodes: whatever the task scores), not tqdm's steps per second beside it.
- Without a bar, a plain line at least every ``PLAIN_EVERY`` seconds, as long as no single step takes longer
  (one comes early when the next would come too late), and at the first and last logged step: ``step
  200/1500  loss 0.4123  1234 items/s  lr 4.1e-04  (1:02 in, about 6:40 left)``; between logged steps ``step
  37/1500  (1:02 in, about 6:40 left)``. No carriage returns, no escape sequences: a log file reads as text.
- ``ticker(what, total, unit)``: the same for other work of known size (data preparation, evaluation,
  decoding): a tqdm bar, or plain lines ``prepare train: 1200/3000 utterances  (0:42 in, about 1:03 left)``.
  Every plain line reads the time from ``clock()`` (tests replace it).
- ``counter(what, total, unit, progress)``: what an API call that counts its work (texts encoded or translated,
  recordings transcribed) shows, chosen by its ``progress`` argument: a bar, plain lines on stdout, plain lines given
  to a function (a command whose stdout is its results writes them to stderr), or nothing.
- Evaluation results and notes go through ``write``: through the bar (``tqdm.write``) when there is
  one, so each line stays whole, and never hidden by ``--no-progress``.
Only the main process (rank 0 under torchrun) prints.
"""

from __future__ import annotations

import sys
import time

PLAIN_EVERY = 10.0  # seconds between plain progress lines, at most


def clock() -> float:
    """The time plain progress lines read (seconds; a test replaces it with a fake clock)."""
    return time.perf_counter()


def clock_text(seconds: float) -> str:
    """``0:42``, ``12:05``, ``1:02:03``."""
    s = max(0, round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


_last_line: list[float] = []  # when the last progress line of this process was written, of any display


def _wrote(now: float) -> None:
    _last_line[:] = [now]


class _Pace:
    """When plain lines are due: at least every ``PLAIN_EVERY`` seconds since the last progress line of any
    display, a line written early when the next chance to write one (one update later, as long as the last
    took) would come too late."""

    def __init__(self, total: int, done: int = 0):
        self.total = total  # (done: where a resumed run starts; the pace counts from the first update)
        self.start = self.last_update = clock()
        self.last_line: float | None = None  # this display's last line
        self.first_update: tuple[int, float] | None = None  # (done, time) at the first update: the pace from it

    def updated(self, done: int, now: float) -> None:
        self.last_update = now
        self.first_update = self.first_update or (done, now)

    def since_line(self, now: float) -> float:
        """Seconds since the last progress line of any display (else since this one started; a clock that went
        back, as a test's fake one, ignores the others')."""
        seen = [t for t in (self.last_line, *_last_line) if t is not None and t <= now]
        return now - (max(seen) if seen else self.start)

    def due(self, now: float) -> bool:
        return self.since_line(now) + (now - self.last_update) > PLAIN_EVERY

    def wrote(self, now: float) -> None:
        self.last_line = now
        _wrote(now)

    def timing(self, done: int, now: float) -> str:
        """``(1:02 in, about 6:40 left)``: the time left at the pace since the first update (the first unit, which
        often holds a start-up cost, left out), none before a second."""
        spent = now - self.start
        d1, t1 = self.first_update or (done, now)
        left = 0.0 if done >= self.total else (now - t1) / (done - d1) * (self.total - done) if done > d1 else None
        return f"({clock_text(spent)} in" + (f", about {clock_text(left)} left)" if left is not None else ")")


class Ticker:
    """Plain lines for work of ``total`` units without a bar, tqdm's ``update`` / ``close``:
    ``what: done/total unit  (0:42 in, about 1:03 left)``; ``write`` (default: print to stdout) takes each."""

    def __init__(self, what: str, total: int, unit: str = "", *, write=None):
        self.what, self.total, self.unit, self.n = what, total, f" {unit}" if unit else "", 0
        self.write = write or (lambda line: print(line, flush=True))
        self.pace = _Pace(total)

    def update(self, n: int = 1) -> None:
        self.n += n
        now = clock()
        if self.pace.due(now):
            self.write(f"{self.what}: {self.n}/{self.total}{self.unit}  {self.pace.timing(self.n, now)}")
            self.pace.wrote(now)
        self.pace.updated(self.n, now)

    def close(self) -> None:
        pass


def ticker(what: str, total: int, unit: str = "", *, bars: bool | None = None, write=None):
    """A tqdm bar (``bars``, None: when stderr is a terminal) or a ``Ticker`` of plain lines for ``total`` units."""
    if bars_wanted(bars):
        return tqdm_bar(total=total, desc=what, unit=f" {unit}" if unit else "it", leave=False)
    return Ticker(what, total, unit, write=write)


class Silent:
    """``update`` / ``close`` that show nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def counter(what: str, total: int, unit: str, progress):
    """``progress`` True: a tqdm bar on stderr, every update drawn; None: a ``Ticker`` of plain lines on stdout; a
    function: the ``Ticker``'s lines given to it; False: ``Silent``. Each has ``update(n)`` and ``close()``."""
    if progress is None or callable(progress):
        return Ticker(what, total, unit, write=progress)
    if progress:
        return tqdm_bar(total=total, desc=what, unit=f" {unit}", leave=False, mininterval=0, miniters=1)
    return Silent()


BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


def bars_wanted(progress: bool | None) -> bool:
    """``progress`` True / False forces bars on / off; None: bars when stderr is a terminal."""
    if progress is not None:
        return progress
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def tqdm_bar(**kw):
    try:
        from tqdm.auto import tqdm
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("progress bars need tqdm: pip install tqdm") from e

    return tqdm(dynamic_ncols=True, **kw)


def format_rate(rec: dict) -> str:
    """``loss 0.4123  1234 items/s  lr 4.1e-04`` from a train record of the metrics log."""
    return f"loss {rec['loss']:.4f}  {rec['items_per_s']:.0f} items/s  lr {rec['lr']:.1e}"


class Progress:
    """The training bar or its plain-line stand-in. ``enabled`` False (other ranks): silent."""

    def __init__(self, total: int, initial: int, desc: str, *, bars: bool, enabled: bool = True):
        self.total, self.enabled = total, enabled
        self.bar = tqdm_bar(total=total, initial=initial, desc=desc, bar_format=BAR_FORMAT) \
            if bars and enabled else None
        self._pace = _Pace(total, initial)
        self._logged = False  # a logged step has been shown

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def step(self, step: int, rec: dict | None = None) -> None:
        """One optimiser step done; ``rec``: the train record when this step was logged."""
        if self.bar is not None:
            self.bar.update(1)
            if rec is not None:
                self.bar.set_postfix_str(format_rate(rec))
            return
        now, pace = clock(), self._pace
        shown = rec is not None and (not self._logged or pace.since_line(now) >= PLAIN_EVERY or step == self.total)
        if shown or pace.due(now) and step < self.total:
            rate = f"{format_rate(rec)}  " if rec is not None else ""
            self.write(f"step {step}/{self.total}  {rate}{pace.timing(step, now)}")
            pace.wrote(now)
            self._logged = self._logged or rec is not None
        pace.updated(step, now)

    def write(self, line: str) -> None:
        """A whole line on stdout, above the bar if there is one."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
            sys.stdout.flush()
        else:
            print(line, flush=True)
        self._pace.wrote(clock())  # a line of any kind: the next plain one is due 10 s after it

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
