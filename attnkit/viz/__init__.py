"""Figures: PNG heatmaps (matplotlib, imported lazily) and self-contained interactive HTML pages."""

from .grid import attention_grid
from .heatmap import attention_heatmap
from .html import attention_html, cross_attention_html, read_attention_html
from .lecture import lecture_html, model_lecture_html, read_lecture_html

__all__ = ["attention_heatmap", "attention_grid", "attention_html", "cross_attention_html", "read_attention_html",
           "lecture_html", "model_lecture_html", "read_lecture_html"]
