"""Decoding options shared by ``attnkit translate`` and ``attnkit evaluate`` (translation runs)."""

from __future__ import annotations

import argparse


def generate_kwargs(args) -> dict:
    """The decoding options as ``attnkit.generation.generate`` arguments."""
    if args.sample and args.beam > 1:
        raise ValueError("translate: --sample and --beam > 1 do not go together (sampling uses one hypothesis)")
    kw = {"num_beams": args.beam, "length_penalty": args.length_penalty}
    if args.max_new_tokens is not None:
        kw["max_new_tokens"] = args.max_new_tokens
    if args.sample:
        kw.update(do_sample=True, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    return kw


def add_decoding_args(p: argparse.ArgumentParser, beam: int = 1) -> None:
    g = p.add_argument_group("decoding")
    g.add_argument("--beam", type=int, default=beam, metavar="K", help=f"beam size (default {beam}: "
                   f"{'greedy' if beam == 1 else 'beam search'})")
    g.add_argument("--length-penalty", type=float, default=1.0,
                   help="beam scores are log p / length ** this (default 1.0)")
    g.add_argument("--max-new-tokens", type=int, default=None, help="default 1.5 x the source length + 10")
    g.add_argument("--sample", action="store_true", help="sample instead of searching")
    g.add_argument("--temperature", type=float, default=1.0, help="sampling: divide the logits by this (default 1.0)")
    g.add_argument("--top-k", type=int, default=None,
                   help="sampling: keep only the k most likely tokens (default: all)")
    g.add_argument("--top-p", type=float, default=1.0,
                   help="sampling: keep the smallest set of most likely tokens whose probability reaches p "
                        "(default 1.0: all)")
    g.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")


