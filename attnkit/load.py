"""``attnkit.load_pretrained``: one function for every kind of saved model attnkit reads.

- a run folder of ``attnkit train`` (``latest.json``, ``meta.json`` or ``ckpt-*/meta.json`` inside) whose
  task can be loaded as a Python object (translation: a ``Translator`` with
  ``translate(texts, **generate_kwargs)``; ``which="best"`` or ``"latest"``, ``dtype=torch.bfloat16`` for
  half the bytes read per decoding step, ``dtype="int8"`` (or ``torch.int8``) for int8 layers, docs/int8.md;
  the names are ``attnkit.inference.dtypes``' table);
- anything else goes to ``attnkit.pretrained.load_pretrained``: a built-in name ("all-MiniLM-L6-v2")
  or a Hugging Face BERT-family folder -> ``SentenceEncoder``; a Hugging Face Marian (opus-mt) folder
  (config.json with model_type "marian") -> ``MarianTranslator`` with ``translate(texts, **generate_kwargs)``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["load_pretrained"]


def load_pretrained(name_or_path="all-MiniLM-L6-v2", **kwargs):
    path = Path(name_or_path)
    if path.is_dir() and (any((path / f).exists() for f in ("latest.json", "meta.json"))
                          or any(path.glob("ckpt-*/meta.json"))):
        from .tasks import task_module
        from .train.checkpoint import load_meta

        folder, meta = load_meta(path, which=kwargs.pop("which", "best"))
        task = meta.get("task")
        mod = task_module(task) if task else None
        if mod is None or not getattr(mod, "LOADS_AS_MODEL", False):
            raise ValueError(f"load_pretrained: {folder} is a run of task {task!r}; only translation runs load as "
                             "models here (use `attnkit predict` for the others)")
        options = {k: kwargs.pop(k) for k in ("dtype",) if k in kwargs}  # a translation run: its weights' dtype
        if "dtype" in options:  # by name or as the torch dtype: a row of the one table of dtypes
            from .inference.dtypes import resolve

            options["dtype"] = resolve(options["dtype"], "load_pretrained")
        if kwargs:
            raise ValueError(f"load_pretrained: options {sorted(kwargs)} do not apply to a {task} run")
        return mod.load(folder, meta, **options)
    from .pretrained import load_pretrained as load_encoder

    return load_encoder(name_or_path, **kwargs)
