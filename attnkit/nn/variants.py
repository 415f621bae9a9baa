"""The efficient-attention variants in one registry, each marked exact or approximate.

``VARIANTS[name]`` describes one; ``build_attention(name, d_model, num_heads, max_len=..., **options)``
returns a module with the call of ``MultiHeadAttention``; ``attention_factory(name, **options)``
returns what ``Encoder(config, attention=...)`` takes. Options not given take the defaults below,
some derived from ``max_len`` (the longest sequence the module will see).

| name | exact | what | cost per layer |
| --- | --- | --- | --- |
| full | yes | softmax attention, automatic backend (SDPA) | O(L^2) time |
| local | yes | ``window(w, w)``, backend "local" | O(L w) |
| longformer | yes | ``window(w, w) | global_tokens(g)``, backend "sparse" (BigBird without random) | O(L (w + g)) |
| sparse | yes | Sparse Transformer: ``window(s, s) | strided(s)``, backend "sparse" | O(L (s + L / s)) |
| linear | no | Katharopoulos et al.: elu + 1 features, backend "linear_approx" | O(L d^2) |
| performer | no | FAVOR+ positive orthogonal random features | O(L m d) |
| linformer | no | learned length projections to k | O(L k) |
| nystrom | no | m segment-mean landmarks | O(L m) |
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn

from ..functional.masks import global_tokens, strided, window
from .attention import MultiHeadAttention
from .efficient import LinformerAttention, NystromAttention, PerformerAttention, StructuredAttention

__all__ = ["Variant", "VARIANTS", "build_attention", "attention_factory", "variant_options"]


@dataclass(frozen=True)
class Variant:
    name: str
    exact: bool
    paper: str
    build: Callable[..., nn.Module]  # (d_model, num_heads, max_len, options, **module kwargs) -> module
    defaults: dict = field(default_factory=dict)  # option -> value, or a function of max_len


def _full(d, h, max_len, o, **kw):
    return MultiHeadAttention(d, h, **kw)


def _local(d, h, max_len, o, **kw):
    return StructuredAttention(d, h, pattern=window(o["window"], o["window"]), default_backend="local", **kw)


def _longformer(d, h, max_len, o, **kw):
    pattern = window(o["window"], o["window"]) | global_tokens(o["global_tokens"])
    return StructuredAttention(d, h, pattern=pattern, default_backend="sparse", **kw)


def _sparse(d, h, max_len, o, **kw):
    s = o["stride"]
    return StructuredAttention(d, h, pattern=window(s, s) | strided(s), default_backend="sparse", **kw)


def _linear(d, h, max_len, o, **kw):
    return StructuredAttention(d, h, default_backend="linear_approx", **kw)


def _performer(d, h, max_len, o, **kw):
    return PerformerAttention(d, h, num_features=o["num_features"], redraw_every=o["redraw_every"], **kw)


def _linformer(d, h, max_len, o, **kw):
    return LinformerAttention(d, h, max_len=max_len, k=o["k"], share_kv=o["share_kv"], **kw)


def _nystrom(d, h, max_len, o, **kw):
    return NystromAttention(d, h, num_landmarks=o["num_landmarks"], pinv_iterations=o["pinv_iterations"], **kw)


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("full", True, "Vaswani et al. 2017", _full),
    Variant("local", True, "local attention (LRA's 'Local')", _local, {"window": 32}),
    Variant("longformer", True, "Beltagy et al. 2020 (BigBird without random: Zaheer et al. 2020)", _longformer,
            {"window": 32, "global_tokens": 2}),
    Variant("sparse", True, "Child et al. 2019 (Sparse Transformer, strided)", _sparse,
            {"stride": lambda max_len: max(1, math.isqrt(max(max_len - 1, 0)) + 1)}),
    Variant("linear", False, "Katharopoulos et al. 2020", _linear),
    Variant("performer", False, "Choromanski et al. 2021 (FAVOR+)", _performer,
            {"num_features": 64, "redraw_every": 1000}),
    Variant("linformer", False, "Wang et al. 2020", _linformer, {"k": 128, "share_kv": False}),
    Variant("nystrom", False, "Xiong et al. 2021", _nystrom, {"num_landmarks": 64, "pinv_iterations": 6}),
)}


def variant_options(name: str, max_len: int, options: dict | None = None) -> dict:
    """The defaults of variant ``name`` (resolved for ``max_len``) updated with ``options``; unknown keys raise."""
    if name not in VARIANTS:
        raise ValueError(f"attention variant: unknown name {name!r}; known: {sorted(VARIANTS)}")
    v = VARIANTS[name]
    options = dict(options or {})
    unknown = sorted(set(options) - set(v.defaults))
    if unknown:
        raise ValueError(f"attention variant {name!r}: unknown options {unknown}; it takes {sorted(v.defaults)}")
    resolved = {k: (d(max_len) if callable(d) else d) for k, d in v.defaults.items()}
    return {**resolved, **options}


def build_attention(name: str, d_model: int, num_heads: int, *, max_len: int, options: dict | None = None,
                    **module_kwargs) -> nn.Module:
    """A module of variant ``name`` with the call of ``MultiHeadAttention`` (``module_kwargs``: bias,
    dropout, position, device, dtype as MultiHeadAttention takes them)."""
    options = variant_options(name, max_len, options)  # raises on an unknown name or option
    return VARIANTS[name].build(d_model, num_heads, max_len, options, **module_kwargs)


def attention_factory(name: str, options: dict | None = None) -> Callable[..., nn.Module]:
    """``fn(config, position, device, dtype) -> module`` for ``Encoder(config, attention=fn)``."""
    variant_options(name, 1, options)  # fail now on a bad name or option

    def make(config, position, device=None, dtype=None) -> nn.Module:
        kw = {"bias": config.bias, "device": device, "dtype": dtype}
        if config.attention_dropout:
            kw["dropout"] = config.attention_dropout
        if position is not None:
            kw["position"] = position
        return build_attention(name, config.d_model, config.num_heads, max_len=config.max_len, options=options,
                               **kw)

    return make
