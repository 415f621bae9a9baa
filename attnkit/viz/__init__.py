"""Figures: PNG heatmaps (matplotlib, imported lazily) and self-contained interactive HTML pages."""

from .heatmap import attention_grid, attention_heatmap
from .html import attention_html, cross_attention_html, read_attention_html

__all__ = ["attention_heatmap", "attention_grid", "attention_html", "cross_attention_html", "read_attention_html"]
