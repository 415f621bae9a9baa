"""Decoding options shared by ``attnkit translate`` and ``attnkit evaluate`` (translation runs).

Their ranges are ``generate``'s and ``mask_predict``'s own (``RANGES``), checked while parsing."""

from __future__ import annotations

import argparse

from ..nn.decoding_ranges import CTC_NAT as CTC_RANGES
from ..nn.decoding_ranges import GENERATE as RANGES
from ..nn.decoding_ranges import MASK_PREDICT as NAT_RANGES


def generate_kwargs(args, decoder: str = "ar", command: str = "translate") -> dict:
    """The decoding options as ``attnkit.generation.generate`` arguments, or for a non-autoregressive run
    (``decoder="nat"``) as ``attnkit.generation.mask_predict`` arguments; options of the other kind or out of
    range (refused already while parsing): a ValueError naming the option, after ``command``."""
    try:
        return _kwargs(args, decoder)
    except ValueError as e:
        raise ValueError(f"{command}: {e}") from None


def _kwargs(args, decoder: str) -> dict:
    nat = {k: v for k, v in (("iterations", args.iterations), ("length_candidates", args.length_candidates),
                             ("blank_penalty", args.blank_penalty)) if v is not None}
    ar = [flag for flag, given in (("--beam", args.beam is not None), ("--sample", args.sample),
                                   ("--length-penalty", args.length_penalty is not None),
                                   ("--max-new-tokens", args.max_new_tokens is not None)) if given]
    if decoder == "nat":
        if ar:
            raise ValueError(f"{', '.join(ar)} {'is' if len(ar) == 1 else 'are'} for autoregressive runs; "
                             "this run is non-autoregressive (trained with --decoder nat): use --iterations and "
                             "--length-candidates")
        return nat
    if nat:
        flags = ", ".join("--" + k.replace("_", "-") for k in nat)
        raise ValueError(f"{flags} {'is' if len(nat) == 1 else 'are'} for non-autoregressive runs (trained "
                         "with --decoder nat); this run is autoregressive: use --beam or --sample")
    beam = args.default_beam if args.beam is None else args.beam
    if args.sample and beam > 1:
        raise ValueError("--sample and --beam > 1 do not go together (sampling uses one hypothesis)")
    sampling = [flag for flag, v in (("--temperature", args.temperature), ("--top-k", args.top_k),
                                     ("--top-p", args.top_p), ("--seed", args.seed)) if v is not None]
    if sampling and not args.sample:
        raise ValueError(f"{', '.join(sampling)} {'applies' if len(sampling) == 1 else 'apply'} with "
                         "--sample only")
    kw = {"num_beams": beam}
    if args.length_penalty is not None:  # else generate's 1.0, or a Marian folder's generation_config.json
        kw["length_penalty"] = args.length_penalty
    if args.max_new_tokens is not None:
        kw["max_new_tokens"] = args.max_new_tokens
    if args.sample:
        kw.update(do_sample=True, temperature=1.0 if args.temperature is None else args.temperature, top_k=args.top_k,
                  top_p=1.0 if args.top_p is None else args.top_p, seed=0 if args.seed is None else args.seed)
    return kw


def add_decoding_args(p: argparse.ArgumentParser, beam: int = 1) -> None:
    g = p.add_argument_group("decoding")
    g.add_argument("--beam", type=RANGES["num_beams"], default=None, metavar="K", help=f"beam size (default {beam}: "
                   f"{'greedy' if beam == 1 else 'beam search'})")
    p.set_defaults(default_beam=beam)
    g.add_argument("--length-penalty", type=RANGES["length_penalty"], default=None,
                   help="beam scores are log p / length ** this (default 1.0, or a Marian folder's "
                        "generation_config.json)")
    g.add_argument("--max-new-tokens", type=RANGES["max_new_tokens"], default=None,
                   help="default 1.5 x the source length + 10")
    g.add_argument("--sample", action="store_true", help="sample instead of searching")
    g.add_argument("--temperature", type=RANGES["temperature"], default=None,
                   help="sampling: divide the logits by this (default 1.0)")
    g.add_argument("--top-k", type=RANGES["top_k"], default=None,
                   help="sampling: keep only the k most likely tokens (0 or default: all)")
    g.add_argument("--top-p", type=RANGES["top_p"], default=None,
                   help="sampling: keep the smallest set of most likely tokens whose probability reaches p "
                        "(default 1.0: all)")
    g.add_argument("--seed", type=RANGES["seed"], default=None, help="sampling seed (default 0)")
    n = p.add_argument_group("non-autoregressive runs (trained with --decoder nat)")
    n.add_argument("--iterations", type=NAT_RANGES["iterations"], default=None, metavar="N",
                   help="Mask-Predict iterations (1: one pass; default: the run's, 10)")
    n.add_argument("--length-candidates", type=NAT_RANGES["length_candidates"], default=None, metavar="K",
                   help="output lengths tried per sentence, the best-scoring kept (default: the run's, 3)")
    n.add_argument("--blank-penalty", type=CTC_RANGES["blank_penalty"], default=None, metavar="X",
                   help="runs trained with --nat-loss ctc: subtracted from the blank's logit at every position "
                        "before its choice; > 0 writes longer translations (default 0); choose it on the "
                        "validation set (attnkit evaluate RUN --data val --blank-penalty X)")
