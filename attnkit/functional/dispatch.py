"""The automatic backend choice: one ordered table, read top to bottom.

``attention(q, k, v, ...)`` without ``backend=`` runs the first row whose condition holds and whose
backend accepts the call (``Backend.why_not``: dtype, device, autograd, mask structure, a native kernel
built here). Every row says why it is there; the figures are in BENCHMARKS.md. A backend that has no
row (``linear_approx``, and any approximate one) only runs when named. ``why_backend`` (or
``select_backend(..., explain=True)``) tells which row a call gets and why the rows above it did not
take it. The README's table is ``markdown_table()``; a test keeps the two equal.

To add a row: a ``Rule(backend, when, why, test)`` in ``RULES``, above the rows it must beat; ``test``
gets the ``Call`` and should be cheap (it runs on every automatic call, before the backend's
``why_not``), ``when`` and ``why`` are what the README shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from .backends import REGISTRY, Backend, Call
from .bias import Bias, EdgeBias
from .checks import check_inputs
from .masks import Causal, Padding, Segments, Window, as_mask, conjuncts, full_parts, graph_of, window_parts

__all__ = ["Rule", "RULES", "Choice", "select_backend", "why_backend", "choose", "markdown_table"]

SHORT_MAX_LEN = 256  # keys (the longest segment) up to which `short` is chosen
TILED_MAX_LEN = {torch.float32: 64, torch.bfloat16: 16}  # keys up to which `tiled` is chosen
TILED_MAX_WINDOW = 129  # window width (left + right + 1) up to which `tiled` is chosen at any length
GROUPED_MAX_LEN = 256  # queries and keys up to which `math_grouped` is chosen
LOCAL_MIN_LEN = 512  # keys from which `local` is chosen (with a window at most a third of them)
CHUNKED_MIN_SCORES = 2048 * 2048  # Lq * Lk from which `chunked` is chosen for a structured bias


class Rule(NamedTuple):
    backend: str
    when: str  # the condition, in words
    why: str  # the reason, with the measured evidence
    test: Callable[[Call], bool]


def _inference(c: Call) -> bool:
    return not torch.is_grad_enabled()


def _local(c: Call) -> bool:
    parts = None if c.bias is not None else window_parts(c.mask)
    lk = c.k.shape[-2]
    return parts is not None and lk >= LOCAL_MIN_LEN and 3 * (parts[0] + parts[1] + 1) <= lk


def _chunked(c: Call) -> bool:
    return (isinstance(c.bias, Bias) and not isinstance(c.bias, EdgeBias)
            and all(isinstance(p, (Causal, Window, Padding)) for p in conjuncts(c.mask))
            and c.q.shape[-2] * c.k.shape[-2] >= CHUNKED_MIN_SCORES)


def _short(c: Call) -> bool:
    if (not _inference(c) or c.q.device.type != "cpu" or c.bias is not None
            or c.q.dtype not in (torch.float32, torch.bfloat16)):
        return False
    longest = c.mask.longest if isinstance(c.mask, Segments) else c.k.shape[-2]
    return longest <= SHORT_MAX_LEN and full_parts(c.mask) is not None


def _tiled(c: Call) -> bool:
    if not _inference(c) or c.q.device.type != "cpu" or c.bias is not None:
        return False
    parts = window_parts(c.mask, require_window=False)
    if parts is None:
        return False
    left, right = parts[:2]
    narrow = left is not None and right is not None and left + right + 1 <= TILED_MAX_WINDOW
    return narrow or (c.k.shape[-2] <= TILED_MAX_LEN.get(c.q.dtype, -1) and c.v.shape[-1] % 16 == 0)


def _grouped(c: Call) -> bool:
    return (_inference(c) and c.q.device.type == "cpu" and c.q.dtype in (torch.bfloat16, torch.float16)
            and c.bias is None and c.q.dim() >= 3 and max(c.q.shape[-2], c.k.shape[-2]) <= GROUPED_MAX_LEN)


RULES: tuple[Rule, ...] = (
    Rule("math", "weights are requested (`return_weights=True`)",
         "the reference, and the only exact backend that returns the weights", lambda c: c.need_weights),
    Rule("graph", "a `graph` mask on its own, with no bias or an `EdgeBias`",
         "only the E edges are computed, O(E * d), instead of an (N, N) masked matrix",
         lambda c: graph_of(c.mask) is not None and (c.bias is None or isinstance(c.bias, EdgeBias))),
    Rule("short", f"inference on CPU, float32 / bfloat16, no mask, `padding` or `segments`, no bias, Lk (for "
                  f"segments: the longest) <= {SHORT_MAX_LEN}, where the native kernel runs",
         "one (sequence, head) whole per job, AVX512-BF16 products in bfloat16: 1.7-9.5x faster than SDPA in "
         "bfloat16 and 1.2-4.1x in float32 from 8 to 256 keys (12 heads of 32, 2 threads), and ahead of "
         "`tiled` and `math_grouped` at every length", _short),
    Rule("tiled", "inference on CPU, `causal` / `window` / `padding` (or none), no bias, Lk <= "
                  f"{TILED_MAX_LEN[torch.float32]} in float32 or <= {TILED_MAX_LEN[torch.bfloat16]} in bfloat16 "
                  "with dv a multiple of 16, "
                  f"or at any length a `window` at most {TILED_MAX_WINDOW} keys wide (left + right + 1), where the "
                  "native kernel runs",
         "tiles of 16 queries over their windows' keys: ahead of SDPA at every length from 6 to 63 keys in "
         "float32 inside all-MiniLM-L6-v2; in bfloat16 only below 16 keys. Windows 17-129 wide (2 threads, "
         "any head size): 1.9-5.7x SDPA with the mask at 64-256 keys, 1.2-3.4x `local` at 1024-4096 with 4 "
         "heads of 36 and 1.0-1.2x with 8 heads of 64 (float32); 2.7-8.5x `math_grouped` in bfloat16", _tiled),
    Rule("local", f"a `window` mask (& `causal`, `padding`), no bias, Lk >= {LOCAL_MIN_LEN} and the window "
                  "(left + right + 1) at most Lk / 3",
         "O(L * window) time and memory: 67x SDPA with the dense mask at L = 16384 and 2.05-2.67x compiled "
         "FlexAttention's forward (window 128, 8 heads of 64, 1-2 threads); below 512 keys or for wider "
         "windows SDPA with the mask was as fast (one core)", _local),
    Rule("chunked", "a structured bias (`ALiBiBias`, `RelativeBias`) with no mask or causal / window / padding, "
                    "Lq * Lk >= 2048 * 2048",
         "the bias is computed per tile, so memory stays linear in L (39 MB against SDPA's 1.2 GB plus its "
         "537 MB bias at L = 4096, 8 heads), and 1.46-2.92x faster than SDPA with the dense bias", _chunked),
    Rule("math_grouped", f"inference on CPU, bfloat16 / float16, Lq and Lk <= {GROUPED_MAX_LEN}, no bias",
         "the math path a few sequences at a time, scores kept in cache: ahead of SDPA from 24 to 256 keys "
         "in bfloat16 (12 heads of 32); in float32 SDPA was faster at every length", _grouped),
    Rule("sdpa", "everything else", "torch's fused kernel (flash attention on CPU), with its backward",
         lambda c: True),
)


class Choice(NamedTuple):
    """What ``why_backend`` returns: the backend, the reason, and the rows above it that did not apply."""

    backend: str
    why: str
    rejected: tuple[tuple[str, str], ...]  # (backend, why not), in table order


def choose(c: Call) -> Backend:
    """The backend of the first row that applies (the fast path of ``attention``)."""
    for rule in RULES:
        if rule.test(c):
            backend = REGISTRY[rule.backend]
            if backend.why_not(c) is None:
                return backend
    raise AssertionError("the last row (sdpa) takes every call without weights")  # pragma: no cover


def _explain(c: Call) -> Choice:
    rejected = []
    for rule in RULES:
        if not rule.test(c):
            rejected.append((rule.backend, f"not chosen when: {rule.when}"))
            continue
        reason = REGISTRY[rule.backend].why_not(c)
        if reason is not None:
            rejected.append((rule.backend, reason))
            continue
        return Choice(rule.backend, f"{rule.when}: {rule.why}", tuple(rejected))
    raise AssertionError("the last row (sdpa) takes every call without weights")  # pragma: no cover


def why_backend(q: Tensor, k: Tensor, v: Tensor, mask=None, bias=None, need_weights: bool = False, *,
                dropout_p: float = 0.0) -> Choice:
    """The backend ``attention(q, k, v, mask, bias=bias, return_weights=need_weights, dropout_p=dropout_p)``
    would run, why, and why each row above it did not. Uses the current grad mode, as ``attention`` does."""
    mask = as_mask(mask)
    check_inputs(q, k, v, mask, bias)
    return _explain(Call.of(q, k, v, mask, bias, dropout_p, need_weights))


def select_backend(q: Tensor, k: Tensor, v: Tensor, mask=None, bias=None, need_weights: bool = False, *,
                   dropout_p: float = 0.0, explain: bool = False) -> str | Choice:
    """The name of the backend the automatic choice gives this call (a ``Choice`` with ``explain=True``)."""
    choice = why_backend(q, k, v, mask, bias, need_weights, dropout_p=dropout_p)
    return choice if explain else choice.backend


def markdown_table() -> str:
    """``RULES`` as the README shows them."""
    rows = ["| # | backend | chosen when | why |", "| --- | --- | --- | --- |"]
    rows += [f"| {i} | `{r.backend}` | {r.when} | {r.why} |" for i, r in enumerate(RULES, 1)]
    return "\n".join(rows)


if __name__ == "__main__":  # python -m attnkit.functional.dispatch: print the table for the README
    print(markdown_table())
