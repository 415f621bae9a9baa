"""Figures: PNG heatmaps (matplotlib, imported lazily) and an interactive HTML page (no dependency)."""

from .heatmap import attention_grid, attention_heatmap
from .html import attention_html, read_attention_html

__all__ = ["attention_heatmap", "attention_grid", "attention_html", "read_attention_html"]
