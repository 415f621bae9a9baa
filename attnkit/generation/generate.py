"""``generate(model, input_ids, ...)``: Hugging Face's argument names, attnkit's loops.

    out = generate(model, input_ids, attention_mask, max_new_tokens=64, num_beams=5)
    out.sequences        # (B, T): the decoder start token first, pad after END (Hugging Face's layout)
    out.sequences_scores # (B,) log p / length ** length_penalty (the score beam search ranks by)
    out.log_probs        # (B,) the model's log-probability of the generated tokens, END included
    out.lengths          # (B,) generated tokens, END included
    out.cross_attentions # with output_attentions=True: (B, layers, heads, T - 1, S), row t = the
                         # attention of the step that produced sequences[:, t + 1]; zero after END

Modes: greedy (default), beam search (``num_beams`` > 1), sampling (``do_sample=True`` with
``temperature``, ``top_k``, ``top_p``; ``generator`` or ``seed`` make it repeatable). Sampling with
beams is not implemented. Unlike Hugging Face, ``top_k`` is off unless given (HF's default is 50).
``max_new_tokens`` defaults to the model's ``config.max_positions`` - 1 when it has one.

Every number is checked against ``RANGES`` (the command line's decoding options take the same ranges) and
the token arrays the search allocates up front against the memory available, before the model runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..nn.decoding_ranges import GENERATE
from ..nn.limits import check_memory
from .beam import beam_search
from .protocol import token_ids
from .search import greedy_or_sample

__all__ = ["generate", "GenerateOutput", "RANGES"]

RANGES = GENERATE  # generate's numeric arguments: wide enough for any real use; NaN and inf never


@dataclass
class GenerateOutput:
    sequences: Tensor
    sequences_scores: Tensor
    log_probs: Tensor
    lengths: Tensor
    cross_attentions: Tensor | None = None


def _check(input_ids, attention_mask, *, early_stopping, do_sample, **numbers) -> None:
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2 or input_ids.dtype not in (torch.int64, torch.int32):
        got = f"{input_ids.dtype} {tuple(input_ids.shape)}" if isinstance(input_ids, Tensor) else type(input_ids)
        raise ValueError(f"generate: `input_ids` must be a (B, S) integer tensor, got {got}")
    if attention_mask is not None and (not isinstance(attention_mask, Tensor)
                                       or attention_mask.shape != input_ids.shape):
        got = tuple(attention_mask.shape) if isinstance(attention_mask, Tensor) else type(attention_mask).__name__
        raise ValueError(f"generate: `attention_mask` must have the shape of input_ids {tuple(input_ids.shape)}, "
                         f"got {got}")

    for name, value in numbers.items():
        if value is not None or name not in ("top_k", "seed"):
            RANGES[name].check(value, f"generate: `{name}`")
    if numbers["min_new_tokens"] > numbers["max_new_tokens"]:
        raise ValueError(f"generate: `min_new_tokens` ({numbers['min_new_tokens']}) exceeds `max_new_tokens` "
                         f"({numbers['max_new_tokens']})")
    if early_stopping not in (True, False, "never"):
        raise ValueError(f"generate: `early_stopping` must be True, False or 'never', got {early_stopping!r}")
    if do_sample and numbers["num_beams"] > 1:
        raise ValueError("generate: sampling with beams (do_sample=True, num_beams > 1) is not implemented; "
                         "use num_beams=1 to sample")
    # the token arrays made before the first step: finished hypotheses (B, beams, T) int64, and their copies
    rows, width = input_ids.shape[0] * numbers["num_beams"], numbers["max_new_tokens"] + 1
    check_memory(3 * 8 * rows * width, f"generate: decoding {input_ids.shape[0]} sentences with num_beams="
                 f"{numbers['num_beams']} and max_new_tokens={numbers['max_new_tokens']}")


@torch.no_grad()
def generate(model, input_ids: Tensor, attention_mask: Tensor | None = None, *, max_new_tokens: int | None = None,
             min_new_tokens: int = 0, num_beams: int = 1, length_penalty: float = 1.0,
             early_stopping: bool | str = False, do_sample: bool = False, temperature: float = 1.0,
             top_k: int | None = None, top_p: float = 1.0, use_cache: bool = True, output_attentions: bool = False,
             generator: torch.Generator | None = None, seed: int | None = None,
             pad_token_id: int | None = None, eos_token_id: int | None = None,
             decoder_start_token_id: int | None = None, suppress_tokens: list[int] | None = None,
             forced_eos_token_id: int | None = None, renormalize_logits: bool = False) -> GenerateOutput:
    """Decode ``model`` (``attnkit.generation.protocol.EncoderDecoder``) from sources input_ids (B, S).

    ``attention_mask`` (B, S): 1 = real token, 0 = padding. ``suppress_tokens``: ids never generated.
    ``forced_eos_token_id``: the id every hypothesis takes at the last step (``max_new_tokens``), as Hugging
    Face's generate does (Marian folders set it to END), so a translation cut by the limit still ends.
    ``renormalize_logits``: each step's allowed log-probabilities normalised again after the rules above (the
    scores beam search ranks by change; Hugging Face's option of that name).
    The model runs in whatever mode it is in: call ``model.eval()`` first to switch dropout off.
    """
    if max_new_tokens is None:
        limit = getattr(getattr(model, "config", None), "max_positions", None)
        if limit is None:
            raise ValueError("generate: pass `max_new_tokens` (the model's config has no max_positions)")
        max_new_tokens = int(limit) - 1
    _check(input_ids, attention_mask, max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
           num_beams=num_beams, length_penalty=length_penalty, temperature=temperature, top_k=top_k, top_p=top_p,
           seed=seed, early_stopping=early_stopping, do_sample=do_sample)
    ids = token_ids(model, pad_token_id, eos_token_id, decoder_start_token_id)
    if seed is not None:
        generator = torch.Generator(device=input_ids.device).manual_seed(seed)
    suppress = None if not suppress_tokens else torch.as_tensor(list(suppress_tokens), dtype=torch.long,
                                                                 device=input_ids.device)
    missing = [m for m in ("encode", "decode_step", "reorder_cache") if not callable(getattr(model, m, None))]
    if missing:  # e.g. a non-autoregressive model, which writes every position at once
        raise ValueError(f"generate: a {type(model).__name__} has no {', '.join(missing)} (step-by-step decoding); "
                         "a non-autoregressive model decodes with attnkit.generation.mask_predict (iterations=, "
                         "length_candidates=), not generate (num_beams=, do_sample=)")
    memory = model.encode(input_ids, attention_mask)
    if forced_eos_token_id is not None and not (isinstance(forced_eos_token_id, int) and not isinstance(
            forced_eos_token_id, bool) and 0 <= forced_eos_token_id):
        raise ValueError(f"generate: `forced_eos_token_id` must be a token id or None, got {forced_eos_token_id!r}")
    common = dict(max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens, suppress=suppress,
                  use_cache=use_cache, output_attentions=output_attentions, length_penalty=length_penalty,
                  forced_eos=forced_eos_token_id, renormalize=bool(renormalize_logits))
    if num_beams > 1:
        hyp = beam_search(model, memory, attention_mask, ids, num_beams=num_beams, early_stopping=early_stopping,
                          **common)
    else:
        hyp = greedy_or_sample(model, memory, attention_mask, ids, do_sample=do_sample, temperature=temperature,
                               top_k=top_k, top_p=top_p, generator=generator, **common)
    width = int(hyp.lengths.max()) if hyp.lengths.numel() else 0
    start = torch.full((input_ids.shape[0], 1), ids.start, dtype=torch.long, device=input_ids.device)
    sequences = torch.cat((start, hyp.tokens[:, :width]), dim=1)  # (B, 1 + T)
    attention = None
    if output_attentions and hyp.cross_attentions is not None:
        attention = hyp.cross_attentions[:, :width].permute(0, 2, 3, 1, 4)  # (B, T, L, H, S) -> (B, L, H, T, S)
    return GenerateOutput(sequences, hyp.scores, hyp.log_probs, hyp.lengths, attention)
