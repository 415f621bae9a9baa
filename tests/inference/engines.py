"""What the engine tests share: the engine ``engine_for`` picks for a model (checked to be of the kind a test
expects), and a padded batch of sources."""

import torch

from attnkit.inference import engine_for


def engine_of(model, kind: type):
    """``engine_for(model)``, which must be a ``kind``."""
    engine = engine_for(model)
    assert isinstance(engine, kind), f"engine_for gave a {type(engine).__name__}, not a {kind.__name__}"
    return engine


def padded_source(low: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (3, 7) in [low, 30) and their mask: row 0 whole, row 1 four tokens, row 2 two (padding id 0)."""
    ids = torch.randint(low, 30, (3, 7))
    mask = torch.ones_like(ids)
    ids[1, 4:], mask[1, 4:] = 0, 0
    ids[2, 2:], mask[2, 2:] = 0, 0
    return ids, mask


def spread(model, std: float = 0.4):
    """``model`` with every matrix drawn from N(0, std^2) (wider than the init: attention and outputs vary)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(std=std)
    return model
