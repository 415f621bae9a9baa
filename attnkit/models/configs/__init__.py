"""The task models' configs, one module per model, in modules without torch: ``attnkit train TASK --help`` is built
from their fields' ``metadata`` without importing torch. Each model's module imports its config from here (and
names it in its ``__all__``), so ``from attnkit.models.vision import VisionConfig`` still works."""
