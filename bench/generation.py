"""Generation speed: attnkit vs Hugging Face ``generate`` vs CTranslate2 (float32 and int8), same weights, one run.

Models: ``base``, a random Marian model of Transformer-base shape (6+6 layers, d_model 512, 8 heads, FFN 2048,
vocabulary 8000, SiLU as opus-mt), built with transformers' ``MarianMTModel`` and saved as a folder; and with
``--run RUN`` a trained translation run, exported with ``attnkit export --format marian`` (post-LN runs only:
Marian's layout has no pre-LN; a pre-LN run is timed in attnkit alone). Every engine reads the same folder:
attnkit through ``attnkit.load_pretrained`` (float32, bfloat16 weights, and int8), Hugging Face through
``MarianMTModel.from_pretrained``, CTranslate2 through its converter (``ct2-transformers-converter``'s class)
and ``compute_type`` float32 / int8.

Cases: batch 1 greedy and batch 32 with 4 beams; source length 24 (random ids); 64 new tokens forced
(``min_new_tokens = max_new_tokens = 64``; CTranslate2 ``min_decoding_length = max_decoding_length = 64``);
``--threads`` (2) threads everywhere; pad never generated. Engines are timed in turn, ``--repeats`` times,
interleaved; medians. tokens/s counts the output tokens of the returned hypothesis (B x 64). Each engine is
built and timed in a process of its own (the parent sends the sources, the worker times the call and returns
the tokens), one at a time: thread pools side by side in one process slowed each other (after a CTranslate2
call torch's OpenMP threads stopped spin-waiting between operations: attnkit's batch 1 ran ~1.5x slower; and
CTranslate2 float32's batch 1 ran ~2x slower next to torch); ``--one-process`` puts them all in one process.

Next to each figure, the memory-bandwidth bound: one decoding step reads every decoder weight and the output
layer once (cross-attention keys and values are projected once, so their weights are not counted; neither is
the K/V cache), so no engine can take fewer than (those bytes / bandwidth) seconds per step; the bandwidth is
measured here (``torch.sum`` over 512 MB on the same threads). At batch 32 x 4 beams the step does 128 rows of
work per weight read and is compute-bound; the bound is then loose.

    flock /tmp/attnkit-heavy.lock .venv/bin/python bench/generation.py [--run RUN] [--repeats 3] [--repeats-batch1 N]
        [--threads 2] [--one-process]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from _timing import machine, table  # noqa: E402

NEW_TOKENS, SOURCE_LENGTH = 64, 24  # --new-tokens, --source-length
CASES = {"batch 1 greedy": (1, 1), "batch 32 beam 4": (32, 4)}


# -- the models ------------------------------------------------------------------------------------
def base_folder(root: Path, vocab: int = 8000) -> Path:
    """A random Marian Transformer-base model saved with a word-level tokenizer (ids: </s> 0, <unk> 1, <pad> last)."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = root / "marian-base"
    torch.manual_seed(0)
    cfg = transformers.MarianConfig(vocab_size=vocab, d_model=512, encoder_layers=6, decoder_layers=6,
                                    encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                                    decoder_ffn_dim=2048, max_position_embeddings=512, pad_token_id=vocab - 1,
                                    eos_token_id=0, decoder_start_token_id=vocab - 1, forced_eos_token_id=None,
                                    activation_function="swish", scale_embedding=True, dropout=0.0)
    hf = transformers.MarianMTModel(cfg).eval()
    with torch.no_grad():  # larger than the init's std 0.02, so that attention and the outputs vary
        for name, p in hf.named_parameters():
            if p.dim() == 2 and "embed_positions" not in name:
                p.normal_(std=0.05 if "shared" in name or "embed" in name else p.shape[1] ** -0.5)
        hf.get_output_embeddings().weight[vocab - 1].zero_()
    hf.save_pretrained(folder)
    table_ = {"</s>": 0, "<unk>": 1, **{f"w{i}": i for i in range(2, vocab - 1)}, "<pad>": vocab - 1}
    tok = Tokenizer(models.WordLevel(table_, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["</s>", "<unk>", "<pad>"])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>", "unk_token": "<unk>",
         "pad_token": "<pad>"}))
    return folder


def run_folder(run: Path, root: Path) -> tuple[Path | None, object]:
    """(Marian folder or None for a pre-LN run, the run's attnkit model)."""
    from attnkit.load import load_pretrained
    from attnkit.pretrained.marian.export import check_exportable, export_marian

    tr = load_pretrained(run)
    try:
        check_exportable(tr.model)
    except ValueError as e:
        print(f"note: {run} is not exportable to Marian ({e}); timing it in attnkit only", file=sys.stderr)
        return None, tr.model
    return export_marian(tr.model, tr.subwords.tokenizer, root / "marian-run"), tr.model


# -- the engines -----------------------------------------------------------------------------------
# An engine is a spec (a tuple of plain values) that ``build`` turns into fn(ids, mask, beams) -> tokens; by default
# each engine is built and timed in a process of its own (``Worker``), so that no engine's thread pool sits in
# another's process: CTranslate2's OpenMP threads, once started, count against the OpenMP runtime torch uses too,
# which then stops spin-waiting between parallel regions (torch ran batch 1 about 1.5x slower after a CTranslate2
# call in its process). ``--one-process`` times them all here, as before.
def build(spec: tuple, threads: int):
    kind = spec[0]
    torch.set_num_threads(threads)
    if kind == "attnkit":  # ("attnkit", Marian folder or run, is a Marian folder, dtype name, fast, pad)
        return attnkit_engine(_attnkit_model(Path(spec[1]), spec[2], getattr(torch, spec[3]), spec[4]), spec[5])
    if kind == "hf":  # ("hf", folder, pad)
        return hf_engine(Path(spec[1]), spec[2])
    if kind == "ct2":  # ("ct2", ct2 folder, compute type, vocabulary)
        return ct2_engine(Path(spec[1]), spec[2], threads, spec[3])
    raise ValueError(f"build: unknown engine kind {kind!r}")


def _attnkit_model(path: Path, marian: bool, dtype: torch.dtype, fast: bool):
    """A Marian folder's decoding model, or a run's model (its inference engine unless ``fast`` is False)."""
    from attnkit.load import load_pretrained

    try:
        from attnkit.inference import engine_for
    except ImportError:  # a checkout from before the inference layer (--compare)
        from attnkit.pretrained.fast_seq2seq import FastSeq2Seq

        def engine_for(m):
            return FastSeq2Seq(m) if FastSeq2Seq.supports(m) else m

    if marian:
        return load_pretrained(path, dtype=dtype).decoder if fast else load_pretrained(path).model.to(dtype)
    if dtype == torch.int8:  # float32 weights, the engine's layers quantised (docs/int8.md)
        return engine_for(load_pretrained(path).model.eval(), dtype=dtype)
    model = load_pretrained(path).model.to(dtype).eval()
    return engine_for(model) if fast else model


def attnkit_engine(model, pad: int):
    from attnkit.generation import generate

    def go(ids, mask, beams):
        out = generate(model, ids, mask, num_beams=beams, min_new_tokens=NEW_TOKENS, max_new_tokens=NEW_TOKENS,
                       suppress_tokens=[pad])
        return out.sequences[:, 1:]

    return go


def hf_engine(folder: Path, pad: int):
    import transformers

    hf = transformers.MarianMTModel.from_pretrained(folder).eval()

    def go(ids, mask, beams):
        with torch.no_grad():
            out = hf.generate(input_ids=ids, attention_mask=mask, num_beams=beams, do_sample=False,
                              min_new_tokens=NEW_TOKENS, max_new_tokens=NEW_TOKENS, suppress_tokens=[pad],
                              forced_eos_token_id=None, early_stopping=False, length_penalty=1.0)
        return out[:, 1:]

    return go


def ct2_engine(ct2_dir: Path, compute_type: str, threads: int, vocab: list[str]):
    import ctranslate2

    tr = ctranslate2.Translator(str(ct2_dir), device="cpu", compute_type=compute_type, inter_threads=1,
                                intra_threads=threads)
    index = {t: i for i, t in enumerate(vocab)}

    def go(ids, mask, beams):
        src = [[vocab[i] for i, m in zip(row.tolist(), mrow.tolist()) if m] for row, mrow in zip(ids, mask)]
        res = tr.translate_batch(src, beam_size=beams, num_hypotheses=1, min_decoding_length=NEW_TOKENS,
                                 max_decoding_length=NEW_TOKENS, length_penalty=1.0)
        return torch.tensor([[index[t] for t in r.hypotheses[0]] for r in res])

    return go


def _timed(fn, ids, mask, beams) -> tuple[float, torch.Tensor]:
    t0 = time.perf_counter()
    out = fn(ids, mask, beams)
    return time.perf_counter() - t0, out


def _serve(conn, spec: tuple, threads: int, new_tokens: int) -> None:
    """A worker process: build the engine, then time one call per request (id lists in, seconds and tokens out)."""
    global NEW_TOKENS
    NEW_TOKENS = new_tokens
    if spec[0] == "attnkit" and len(spec) > 6:  # another checkout of attnkit (--compare)
        sys.path.insert(0, spec[6])
    fn = build(spec, threads)
    conn.send("ready")
    while (msg := conn.recv()) is not None:
        ids, mask, beams = msg
        seconds, out = _timed(fn, torch.tensor(ids), torch.tensor(mask), beams)
        conn.send((seconds, out.tolist()))


class Worker:
    """An engine in its own (spawned) process; ``run`` blocks while it decodes, so engines never overlap."""

    def __init__(self, spec: tuple, threads: int):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, spec, threads, NEW_TOKENS), daemon=True)
        self.proc.start()
        if self.conn.recv() != "ready":
            raise RuntimeError(f"Worker: engine {spec[0]} did not start")

    def run(self, ids, mask, beams) -> tuple[float, torch.Tensor]:
        self.conn.send((ids.tolist(), mask.tolist(), beams))
        seconds, out = self.conn.recv()
        return seconds, torch.tensor(out)

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join(timeout=30)


class InProcess:
    def __init__(self, spec: tuple, threads: int):
        self.fn = build(spec, threads)

    def run(self, ids, mask, beams) -> tuple[float, torch.Tensor]:
        return _timed(self.fn, ids, mask, beams)

    def close(self) -> None:
        pass


# -- the bound -------------------------------------------------------------------------------------
def bandwidth(threads: int, mbytes: int = 512, repeats: int = 7) -> float:
    """Bytes per second that ``torch.sum`` reads from memory here (median)."""
    x = torch.ones(mbytes * 2 ** 20 // 4)
    x.sum()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        x.sum()
        times.append(time.perf_counter() - t0)
    return x.numel() * 4 / statistics.median(times)


def step_bytes(cfg, bytes_per_weight: float, float_bytes: float | None = None) -> float:
    """Bytes of the weights one decoding step reads: decoder layers (cross K/V projection excluded) + output.

    ``float_bytes``: bytes per weight of the FFN's second product and the output layer (what attnkit's int8 keeps in
    float32 where its own int8 kernels do not run: ``quant.FLOAT_LINEARS``); default ``bytes_per_weight``."""
    tc = cfg.transformer
    d, f, v = tc.d_model, tc.d_ff, cfg.tgt_vocab_size
    fb = bytes_per_weight if float_bytes is None else float_bytes
    per_layer = ((3 * d * d + d * d) + (d * d + d * d) + d * f) * bytes_per_weight + d * f * fb  # self, cross, FFN
    return tc.num_decoder_layers * per_layer + v * d * fb


# -- the run ---------------------------------------------------------------------------------------
def sources(vocab: int, pad: int, batch: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, pad, (batch, SOURCE_LENGTH), generator=g)
    ids[:, -1] = 0  # </s>
    return ids, torch.ones_like(ids)


def bench_model(name: str, folder: Path | None, model, args, root: Path, run: Path | None = None) -> list[str]:
    """Time the engines on ``folder`` (a Marian folder; None: attnkit alone, on the run ``run``)."""
    cfg = model.config
    pad = cfg.pad_token_id
    source, marian = (folder, True) if folder is not None else (run, False)
    specs = {"attnkit float32": ("attnkit", str(source), marian, "float32", True, pad),
             "attnkit bfloat16": ("attnkit", str(source), marian, "bfloat16", True, pad),
             "attnkit int8": ("attnkit", str(source), marian, "int8", True, pad)}
    for other in args.compare or []:
        for dt in ("float32", "bfloat16", "int8"):
            specs[f"attnkit {dt} @{other}"] = ("attnkit", str(source), marian, dt, True, pad, str(other.resolve()))
    if args.reference:
        specs["attnkit reference modules"] = ("attnkit", str(source), marian, "float32", False, pad)
    if folder is not None:
        import ctranslate2
        import transformers

        specs["HF generate"] = ("hf", str(folder), pad)
        ct2_dir = root / f"ct2-{name}"
        ctranslate2.converters.TransformersConverter(str(folder)).convert(str(ct2_dir), force=True)
        tok = transformers.AutoTokenizer.from_pretrained(folder)
        vocab = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda x: x[1])]
        for ct in ("float32", "int8"):
            specs[f"CTranslate2 {ct}"] = ("ct2", str(ct2_dir), ct, vocab)
    if args.engines:
        specs = {k: v for k, v in specs.items() if k == "attnkit float32" or any(k.startswith(e) for e in args.engines)}
    engines = {k: (InProcess if args.one_process else Worker)(spec, args.threads) for k, spec in specs.items()}
    try:
        return _time_cases(name, engines, cfg, pad, args)
    finally:
        for e in engines.values():
            e.close()


def _time_cases(name: str, engines: dict, cfg, pad: int, args) -> list[str]:
    from attnkit.inference.quant_linear import float_linears

    bw = bandwidth(args.threads)
    where = "all engines in this process" if args.one_process else "each engine in a process of its own"
    kept = float_linears()
    int8_reads = ("attnkit int8 the same: every linear layer in int8" if not kept else
                  f"attnkit int8, whose {' and '.join(kept)} stay float32, {step_bytes(cfg, 1, 4) / 1e6:.0f} MB")
    lines = [f"### {name}: {cfg.transformer.num_encoder_layers}+{cfg.transformer.num_decoder_layers} layers, "
             f"d_model {cfg.transformer.d_model}, vocabulary {cfg.tgt_vocab_size}",
             f"measured read bandwidth: {bw / 1e9:.1f} GB/s; weights read per step: "
             f"{step_bytes(cfg, 4) / 1e6:.0f} MB in float32, {step_bytes(cfg, 2) / 1e6:.0f} MB in bfloat16, "
             f"{step_bytes(cfg, 1) / 1e6:.0f} MB in int8 (the int8 bound below; {int8_reads}); {where}"]
    for case, (batch, beams) in CASES.items():
        if args.cases and case not in args.cases:
            continue
        ids, mask = sources(cfg.src_vocab_size, pad, batch)
        outs = {k: e.run(ids, mask, beams)[1] for k, e in engines.items()}  # warm-up, and the outputs to compare
        samples = {k: [] for k in engines}
        repeats = args.repeats_batch1 if (batch == 1 and args.repeats_batch1) else args.repeats
        for _ in range(repeats):
            for k, e in engines.items():
                samples[k].append(e.run(ids, mask, beams)[0])
        med = {k: statistics.median(v) for k, v in samples.items()}
        ref = outs["attnkit float32"]
        rows = []
        for k in engines:
            tps = batch * NEW_TOKENS / med[k]
            per_byte = 2 if "bfloat16" in k else 1 if "int8" in k else 4
            bound = batch * bw / step_bytes(cfg, per_byte)  # tokens/s if only the weight reads took time
            same = sum(bool(torch.equal(a, b)) for a, b in zip(outs[k], ref)) if outs[k].shape == ref.shape else 0
            rows.append([k, med[k], f"{tps:.1f}", _ratio(med, "HF generate", k), _ratio(med, "CTranslate2 float32", k),
                         _ratio(med, "CTranslate2 int8", k), f"{bound:.0f}", f"{100 * tps / bound:.0f}%",
                         f"{same}/{batch}"])
        lines += ["", f"{case} ({NEW_TOKENS} new tokens, source {SOURCE_LENGTH}, {args.threads} threads, median of "
                      f"{repeats})", "",
                  table(["engine", "seconds", "tokens/s", "x HF", "x CT2 f32", "x CT2 int8", "bandwidth bound tok/s",
                         "of bound", "same tokens as attnkit f32"], rows)]
    return lines


def _ratio(med: dict, peer: str, k: str) -> str:
    return f"{med[peer] / med[k]:.2f}" if peer in med else "-"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, default=None, help="also a trained translation run (attnkit train translate)")
    p.add_argument("--no-base", action="store_true", help="skip the random Transformer-base model")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--repeats-batch1", type=int, default=None,
                   help="repeats of the batch-1 case (noisier: a run is ~1 s); default --repeats")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--new-tokens", type=int, default=64, help="tokens generated per sentence (forced)")
    p.add_argument("--source-length", type=int, default=24)
    p.add_argument("--cases", nargs="*", choices=list(CASES), default=None)
    p.add_argument("--one-process", action="store_true",
                   help="time every engine in this process (thread pools side by side) instead of one process each")
    p.add_argument("--compare", type=Path, nargs="*", default=None,
                   help="also time attnkit from these checkouts (A/B of a change; each in its own process)")
    p.add_argument("--engines", nargs="*", default=None,
                   help="time only the engines whose names start with these (attnkit float32 always runs)")
    p.add_argument("--reference", action="store_true", help="also time attnkit's plain modules (no inference engine)")
    p.add_argument("--out", type=Path, default=None, help="append the tables to this Markdown file")
    args = p.parse_args()
    if args.compare and args.one_process:
        p.error("--compare needs a process per engine; drop --one-process")
    global NEW_TOKENS, SOURCE_LENGTH
    NEW_TOKENS, SOURCE_LENGTH = args.new_tokens, args.source_length
    torch.set_num_threads(args.threads)
    from attnkit.load import load_pretrained

    started = datetime.datetime.now(datetime.UTC)
    lines = [f"## bench/generation.py, {started:%Y-%m-%d %H:%M} UTC", f"machine: {machine()}",
             f"load average at start: {os.getloadavg()[0]:.2f}"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if not args.no_base:
            folder = base_folder(root)
            lines += [""] + bench_model("random Marian Transformer-base", folder, load_pretrained(folder).model,
                                        args, root)
        if args.run is not None:
            folder, model = run_folder(args.run, root)
            lines += [""] + bench_model(f"trained run {args.run.name}", folder, model, args, root, run=args.run)
    lines.append(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text + "\n\n")


if __name__ == "__main__":
    main()
