"""Public mask builders (True = may attend). See ``attnkit.functional.masks`` for the details."""

from attnkit.functional.masks import (  # noqa: F401
    And,
    Causal,
    Dense,
    GlobalTokens,
    Graph,
    Mask,
    Or,
    Padding,
    Segments,
    Strided,
    Window,
    as_mask,
    causal,
    conjuncts,
    disjuncts,
    for_heads,
    global_tokens,
    graph,
    keep_positions,
    padding,
    segments,
    strided,
    window,
)

__all__ = ["Mask", "Dense", "Causal", "Window", "Padding", "Graph", "Segments", "And", "Or",
           "causal", "window", "padding", "graph", "segments", "as_mask", "conjuncts", "for_heads", "keep_positions",
           "GlobalTokens", "Strided", "global_tokens", "strided", "disjuncts"]
