"""Decoding for encoder-decoder models, model-agnostic: greedy, beam search, sampling, with a K/V cache.

``generate(model, input_ids, attention_mask, **hf_style_arguments) -> GenerateOutput``. The model is
reached only through ``protocol.EncoderDecoder`` (encode / decode_step / reorder_cache + token ids).
Non-autoregressive models: ``mask_predict(model, input_ids, attention_mask, iterations=, length_candidates=)``.
"""

from .beam import BeamState, beam_search
from .generate import GenerateOutput, generate
from .logits import constrain, warp
from .mask_predict import NATOutput, mask_predict
from .protocol import EncoderDecoder, TokenIds, token_ids
from .search import Hypotheses, greedy_or_sample

__all__ = ["generate", "GenerateOutput", "EncoderDecoder", "TokenIds", "token_ids", "Hypotheses",
           "beam_search", "BeamState", "greedy_or_sample", "constrain", "warp", "mask_predict", "NATOutput"]
