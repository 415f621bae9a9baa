"""Task glue: data + model + ``attnkit.train.Task``, and what ``evaluate`` / ``predict`` need.

A task is two modules. Its options, ``attnkit/tasks/options/<name>.py``, without torch (``attnkit train <name>
--help`` and ``attnkit evaluate --help`` read only these), define:

- ``NAME``; ``HELP``; ``ENCODER_DEFAULTS`` (TransformerConfig fields) and ``TRAIN_DEFAULTS`` (TrainConfig fields);
- ``ENCODER_FIELDS``: the TransformerConfig fields its model reads (only these become ``train`` options);
- ``EVALUATION_DATA``: what ``evaluate --data`` takes for this task and what it scores without it;
- ``add_arguments(parser)``: its own options (data paths with ``add_data_args``, model choices from its model's
  config in ``attnkit.models.configs``).

The task module, ``attnkit/tasks/<name>.py``, defines:

- ``build(args, encoder: TransformerConfig, seed: int) -> attnkit.train.Task``: data + model + meta
  (the meta must hold everything ``load`` needs: model config, vocabulary, labels);
- ``load(folder, meta) -> model`` with the weights loaded, in eval mode;
- ``evaluation_data(meta, path, args) -> examples`` and ``task_for(model, meta, args) -> Task`` for ``evaluate``;
- ``predict(model, meta, inputs, out_dir, args) -> list[str]``: lines to print (and PNGs written); ``args``
  holds ``data_dir`` / ``download`` for inputs that name dataset examples (``test:0``).
- optionally ``score(model, meta, args, generate_kwargs) -> lines`` (``evaluate`` with the task's own metric,
  e.g. BLEU) and ``finish(args, task, result) -> lines`` (after training, e.g. checkpoint averaging).

Add one line to ``TASKS`` for a new task; ``attnkit train <name>`` then exists.
"""

from __future__ import annotations

import importlib

TASKS = {
    "tagger": "attnkit.tasks.tagger",
    "classifier": "attnkit.tasks.classifier",
    "image": "attnkit.tasks.image",
    "speech": "attnkit.tasks.speech",
    "graph": "attnkit.tasks.graph",
    "translate": "attnkit.tasks.translate",
    "asr": "attnkit.tasks.asr",
}


def task_module(name: str):
    """The task's module (it imports torch)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS)}")
    return importlib.import_module(TASKS[name])


def task_options(name: str):
    """The task's options module (``attnkit.tasks.options.<name>``, without torch)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS)}")
    return importlib.import_module(f"attnkit.tasks.options.{name}")

