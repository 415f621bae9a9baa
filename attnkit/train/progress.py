"""What a training run prints: a progress bar on a terminal, plain lines in a log.

- Bars (tqdm, on stderr) only when stderr is a terminal, unless ``progress`` says otherwise
  (``--progress`` / ``--no-progress``). A bar shows one rate: items per second (tokens, images,
  nodes: whatever the task scores), not tqdm's steps per second beside it.
- Without a bar, a plain line at most every ``PLAIN_EVERY`` seconds (and at the first and last
  logged step): ``step 200/1500  loss 0.4123  1234 items/s  lr 4.1e-04``. No carriage returns,
  no escape sequences: a log file reads as text.
- Evaluation results and notes go through ``write``: through the bar (``tqdm.write``) when there is
  one, so each line stays whole, and never hidden by ``--no-progress``.
Only the main process (rank 0 under torchrun) prints.
"""

from __future__ import annotations

import sys
import time

PLAIN_EVERY = 10.0  # seconds between plain progress lines
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
    from tqdm.auto import tqdm

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
        self._last_line: float | None = None

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
        now = time.perf_counter()
        if rec is not None and (self._last_line is None or now - self._last_line >= PLAIN_EVERY
                                or step == self.total):
            self.write(f"step {step}/{self.total}  {format_rate(rec)}")
            self._last_line = now

    def write(self, line: str) -> None:
        """A whole line on stdout, above the bar if there is one."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
            sys.stdout.flush()
        else:
            print(line, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
