"""Figures (matplotlib, imported lazily)."""

from .heatmap import attention_heatmap, attention_grid

__all__ = ["attention_heatmap", "attention_grid"]
