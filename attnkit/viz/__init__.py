"""Figures (matplotlib, imported lazily)."""

from .heatmap import attention_grid, attention_heatmap

__all__ = ["attention_heatmap", "attention_grid"]
