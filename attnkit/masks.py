"""Public mask builders (True = may attend). See ``attnkit.functional.masks`` for the details."""

from attnkit.functional.masks import (  # noqa: F401
    And,
    Causal,
    Dense,
    Graph,
    Mask,
    Or,
    Padding,
    Window,
    as_mask,
    causal,
    conjuncts,
    for_heads,
    graph,
    keep_positions,
    padding,
    window,
)

__all__ = ["Mask", "Dense", "Causal", "Window", "Padding", "Graph", "And", "Or",
           "causal", "window", "padding", "graph", "as_mask", "conjuncts", "for_heads", "keep_positions"]
