"""A trained translation run exported as a Marian folder: do attnkit, Hugging Face and CTranslate2 agree?

Exports RUN with ``attnkit export --format marian``, then translates a Multi30k split (greedy) with the run
itself (attnkit), the folder in Hugging Face (``MarianMTModel.generate``), the folder converted by
CTranslate2's converter (float32), and the folder loaded back into attnkit; prints how many translations
equal the run's and the sacreBLEU of each.

    .venv/bin/python bench/marian_roundtrip.py RUN [--split test] [--max-new-tokens 128]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path)
    p.add_argument("--split", default="test")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import ctranslate2
    import sacrebleu
    import transformers

    from attnkit.data.multi30k import multi30k, split_name
    from attnkit.load import load_pretrained
    from attnkit.pretrained.marian.export import export_marian

    run = load_pretrained(args.run)
    corpus = multi30k(split_name(args.split), run.meta["src_lang"], run.meta["tgt_lang"])
    src, ref = corpus.src[: args.limit], corpus.tgt[: args.limit]
    n_new = args.max_new_tokens
    results: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        results[name] = fn()
        seconds[name] = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        folder = export_marian(run.model, run.subwords.tokenizer, Path(tmp) / "marian")
        timed("attnkit (the run)", lambda: run.translate(src, max_new_tokens=n_new, num_beams=1))
        hf = transformers.MarianMTModel.from_pretrained(folder).eval()
        tok = transformers.AutoTokenizer.from_pretrained(folder)

        def hf_translate():
            out = []
            for i in range(0, len(src), args.batch_size):
                batch = tok(src[i:i + args.batch_size], return_tensors="pt", padding=True, truncation=True)
                with torch.no_grad():
                    gen = hf.generate(**batch, max_new_tokens=n_new, num_beams=1, do_sample=False)
                out += tok.batch_decode(gen, skip_special_tokens=True)
            return out

        timed("Hugging Face (the folder)", hf_translate)
        ct2_dir = Path(tmp) / "ct2"
        ctranslate2.converters.TransformersConverter(str(folder)).convert(str(ct2_dir))
        engine = ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=args.threads)

        def ct2_translate():
            toks = [tok.convert_ids_to_tokens(tok(s, truncation=True).input_ids) for s in src]
            res = engine.translate_batch(toks, beam_size=1, max_decoding_length=n_new, min_decoding_length=0,
                                         suppress_sequences=[["<s>"]], disable_unk=True,
                                         max_batch_size=args.batch_size)
            return [tok.convert_tokens_to_string(r.hypotheses[0]) for r in res]

        timed("CTranslate2 float32 (converted folder)", ct2_translate)
        back = load_pretrained(folder)
        timed("attnkit (the folder)", lambda: back.translate(src, max_new_tokens=n_new, num_beams=1))

    base = results["attnkit (the run)"]
    print(f"{args.run}: {len(src)} sentences of multi30k {args.split}, greedy, up to {n_new} new tokens")
    for name, hyps in results.items():
        same = sum(a == b for a, b in zip(hyps, base))
        bleu = sacrebleu.metrics.BLEU().corpus_score(hyps, [ref]).score
        print(f"  {name:40s} same as the run: {same}/{len(src)}  BLEU {bleu:.2f}  ({seconds[name]:.1f} s)")
        for a, b, s in list(zip(hyps, base, src))[:200]:
            if a != b:
                print(f"    first difference: {s!r}\n      run:  {b!r}\n      this: {a!r}", file=sys.stderr)
                break


if __name__ == "__main__":
    main()
