"""What decoding needs from a model: four methods and three token ids, nothing about its class.

An encoder-decoder ``model`` is decoded through

- ``model.encode(input_ids (B, S), attention_mask (B, S) | None) -> memory``: a tensor whose first
  dim is the batch (B, S, ...); the search expands it to beams with ``index_select`` along dim 0;
- ``model.decode_step(tokens (B, t), memory, memory_mask, cache, *, use_cache, output_attentions)``
  -> an object with ``.logits`` (B, V) for the last position, ``.cache`` (opaque: whatever the model
  keeps between steps; None without ``use_cache``) and ``.cross_attentions`` (per layer (B, H, t, S)
  when asked). Without a cache, ``tokens`` is the whole prefix; with one, the new token only;
- ``model.reorder_cache(cache, index (B',), *, cross=True) -> cache``: row i of the result is row
  ``index[i]``. ``cross=False`` promises that every row stays among rows of the same source sentence
  (beams of one sentence), so entries computed from the source alone (the cross-attention keys and
  values) may be left in place;
- ``model.config``: ``pad_token_id``, ``eos_token_id`` and ``decoder_start_token_id`` (None: the
  ``bos_token_id``), unless ``generate`` is given them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

__all__ = ["EncoderDecoder", "TokenIds", "token_ids"]


@runtime_checkable
class EncoderDecoder(Protocol):
    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor: ...

    def decode_step(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None, cache: Any = None, *,
                    use_cache: bool = True, output_attentions: bool = False) -> Any: ...

    def reorder_cache(self, cache: Any, index: Tensor, *, cross: bool = True) -> Any: ...


@dataclass(frozen=True)
class TokenIds:
    pad: int
    eos: int
    start: int


def token_ids(model, pad_token_id: int | None, eos_token_id: int | None,
              decoder_start_token_id: int | None) -> TokenIds:
    """The ids given, else the model config's; ValueError naming the one that is missing."""
    cfg = getattr(model, "config", None)

    def pick(name: str, given: int | None, *fallbacks: str) -> int:
        if given is not None:
            value = given
        else:
            value = None
            for attr in (name, *fallbacks):
                value = getattr(cfg, attr, None)
                if value is not None:
                    break
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"generate: `{name}` must be a token id >= 0 (pass it, or set it in model.config), "
                             f"got {value!r}")
        return value

    return TokenIds(pad=pick("pad_token_id", pad_token_id), eos=pick("eos_token_id", eos_token_id),
                    start=pick("decoder_start_token_id", decoder_start_token_id, "bos_token_id"))
