"""Public mask builders (True = may attend). See ``attnkit.functional.masks`` for the details."""

from attnkit.functional.masks import (  # noqa: F401
    And,
    Causal,
    Dense,
    Graph,
    Mask,
    Or,
    Padding,
    Segments,
    Window,
    as_mask,
    causal,
    conjuncts,
    for_heads,
    graph,
    keep_positions,
    padding,
    segments,
    window,
)

__all__ = ["Mask", "Dense", "Causal", "Window", "Padding", "Graph", "Segments", "And", "Or",
           "causal", "window", "padding", "graph", "segments", "as_mask", "conjuncts", "for_heads", "keep_positions"]
