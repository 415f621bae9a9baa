"""Marian (opus-mt) checkpoints in and out: ``load_marian(folder)`` and ``export_marian(model, tokenizer, folder)``.

``attnkit.load_pretrained(folder)`` calls ``load_marian`` when ``config.json`` says model_type "marian".
"""

from .load import is_marian_folder, load_marian, marian_model
from .tokenizer import MarianTokenizer, read_tokenizer
from .translator import MarianTranslator, TranslationWarning

__all__ = ["load_marian", "is_marian_folder", "marian_model", "MarianTokenizer", "read_tokenizer",
           "MarianTranslator", "TranslationWarning"]
