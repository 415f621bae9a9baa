"""``SentenceEncoder``: texts -> sentence vectors, and a look inside one text's attention.

``encode`` tokenises with the folder's ``tokenizer.json`` (the ``tokenizers`` library), sorts the
texts by token count before cutting batches (``plan_batches``: neighbours have nearly the same length),
runs an inference copy of attnkit's ``BertModel`` under ``torch.inference_mode`` and pools as the
folder's sentence-transformers config says (e.g. mean over real tokens, then L2 normalisation).
Where the native ``short`` attention kernel runs (AVX-512 CPUs; bfloat16 needs AVX512-BF16) a batch
is packed: its texts end to end in one row with a ``segments`` mask and per-text positions, so no
layer computes anything on padding. Elsewhere batches are right-padded with a ``padding`` mask.
Batches run concurrently, one single-threaded worker thread per torch thread (``workers``).

Texts longer than ``max_seq_length`` tokens ([CLS] and [SEP] included) are truncated to it, with a
``UserWarning`` saying how many were cut; the limit is ``sentence_bert_config.json``'s
``max_seq_length`` when present (as sentence-transformers does), else ``max_position_embeddings``.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional import select_backend
from ..functional.masks import keep_positions, segments
from ..functional.pooling import masked_max, masked_sum
from ..inference import BertEngine, engine_for
from ..inference.dtypes import DType, of_torch, resolve
from ..models.bert import BertModel
from ..train.progress import counter
from .folder import ModelFolder, Pooling

__all__ = ["SentenceEncoder", "Attended"]


class Attended(NamedTuple):
    """One text, looked into. L tokens (with [CLS] and [SEP]), N layers, H heads, d features."""

    tokens: list[str]  # L word pieces
    attentions: Tensor  # (N, H, L, L): rows = queries, columns = keys; each row sums to 1
    hidden_states: Tensor  # (N + 1, L, d): the embeddings, then every layer's output
    embedding: Tensor  # (d_out,): the pooled sentence vector


def pool(hidden: Tensor, lengths: Tensor, pooling: Pooling) -> Tensor:
    """hidden (B, L, d) float32, lengths (B,) -> (B, d * len(modes)), sentence-transformers' order."""
    n = lengths.to(hidden.dtype).clamp(min=1e-9).unsqueeze(1)  # (B, 1)
    parts = []
    for mode in pooling.modes:
        if mode == "cls":
            parts.append(hidden[:, 0])
        elif mode == "max":
            parts.append(masked_max(hidden, lengths))
        else:
            parts.append(masked_sum(hidden, lengths) / (n if mode == "mean" else n.sqrt()))  # (B, d)
    out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
    return F.normalize(out, p=2, dim=1) if pooling.normalize else out


def openmp_backend() -> bool:
    """Whether ATen parallelises with OpenMP, whose thread count each thread sets for itself
    (so one thread can run single-threaded ops while another does the same)."""
    return "ATen parallel backend: OpenMP" in torch.__config__.parallel_info()


def stream_count(workers: int | None, batches: int) -> int:
    """How many batches ``encode`` runs at once: ``workers``, by default one per torch thread; never more
    than there are batches, and 1 where ATen's parallel backend is not OpenMP."""
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ValueError(f"encode: `workers` must be a positive integer or None, got {workers!r}")
    wanted = torch.get_num_threads() if workers is None else workers
    return max(1, min(wanted, batches)) if wanted > 1 and openmp_backend() else 1


def plan_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices sorted by token count, longest first, cut into batches of ``batch_size``.

    Neighbours in that order have (nearly) the same length, so batches carry little padding.
    (Cutting at every length change instead gave smaller, padding-free batches but ran slower here.)
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[s:s + batch_size] for s in range(0, len(order), batch_size)]


class SentenceEncoder:
    """A pretrained BERT-family encoder with its tokenizer and pooling (see ``load_pretrained``)."""

    def __init__(self, model: BertModel, tokenizer, folder: ModelFolder, name: str, *, fast: bool = True,
                 dtype: DType | torch.dtype | str | None = None):
        self.model = model.eval()  # the reference modules: ``attend`` and parity tests use these
        self.fast = fast
        self.tokenizer = tokenizer  # a ``tokenizers.Tokenizer``, truncation set to max_seq_length
        self.folder = folder
        self.name = name
        self.pooling = folder.pooling
        self.max_seq_length = folder.max_seq_length
        self.pad_id = model.config.pad_token_id
        own = next(model.parameters()).dtype
        self._default = of_torch(own) if dtype is None else resolve(dtype, "SentenceEncoder", fast=fast)
        self.dtype = own if self._default is None else self._default.torch  # ``encode``'s default (torch.int8: int8)
        self._by_dtype: dict[str, BertModel | BertEngine] = {}  # by the dtype's name

    def __repr__(self) -> str:
        c = self.model.config
        return (f"SentenceEncoder({self.name!r}, layers={c.num_hidden_layers}, "
                f"heads={c.num_attention_heads}, "
                f"dim={self.dim}, max_seq_length={self.max_seq_length}, pooling={self.pooling})")

    @property
    def dim(self) -> int:
        """Size of a sentence vector."""
        return self.model.config.hidden_size * len(self.pooling.modes)

    @property
    def config(self):
        return self.model.config

    def _row(self, dtype, where: str) -> DType:
        """``dtype=`` as given to ``where`` (None: ``encode``'s default) -> its row of the dtype table."""
        return resolve(self._default if dtype is None else dtype, where, fast=self.fast)

    def model_for(self, dtype: DType | torch.dtype | str | None = None) -> BertModel | BertEngine:
        """What ``encode`` runs in ``dtype`` (made once and kept): the inference engine when ``fast``
        (``attnkit.inference.engine_for``, which falls back to the model where no engine runs it), else a copy of
        the model in that dtype."""
        row = self._row(dtype, "model_for")
        if row.name not in self._by_dtype:
            self._by_dtype[row.name] = (engine_for(self.model, dtype=row) if self.fast
                                        else copy.deepcopy(self.model).to(row.torch).eval())
        return self._by_dtype[row.name]

    def tokenize(self, texts: Sequence[str], *, warn: bool = True, ids_only: bool = False) -> list:
        """``tokenizers.Encoding`` per text, truncated to ``max_seq_length`` (with a warning).
        ``ids_only``: skip the token strings and offsets (``encode_batch_fast`` where the installed
        ``tokenizers`` has it, faster: docs/design.md); ids and truncation are the same."""
        if isinstance(texts, str):
            raise ValueError("tokenize: `texts` must be a list of strings, got one string")
        clean = []
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ValueError(f"encode: text {i} must be a str, got {type(t).__name__}")
            t = t.strip()
            clean.append(t.lower() if self.folder.do_lower_case else t)
        batch = getattr(self.tokenizer, "encode_batch_fast", None) if ids_only else None
        encodings = (batch or self.tokenizer.encode_batch)(clean) if clean else []
        cut = [i for i, e in enumerate(encodings) if e.overflowing]
        if cut and warn:
            warnings.warn(f"{self.name}: {len(cut)} text(s) longer than the model's limit of "
                          f"{self.max_seq_length} tokens were truncated to {self.max_seq_length} tokens "
                          f"(first: text {cut[0] + 1})", UserWarning, stacklevel=3)  # numbered from 1, as translate
        return encodings

    @staticmethod
    def _lengths(encodings: list) -> np.ndarray:
        return np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))  # (B,)

    def _batch(self, encodings: list) -> tuple[Tensor, Tensor]:
        """ids (B, L) right-padded with the pad id, lengths (B,)."""
        lengths = self._lengths(encodings)
        ids = np.full((len(encodings), int(lengths.max())), self.pad_id, dtype=np.int64)  # (B, L)
        for row, e in enumerate(encodings):
            ids[row, : lengths[row]] = e.ids
        return torch.from_numpy(ids), torch.from_numpy(lengths)

    def _pack(self, encodings: list) -> tuple[Tensor, Tensor, Tensor]:
        """ids (1, T) and positions (1, T) of the texts end to end, lengths (B,); T = sum of lengths."""
        lengths = self._lengths(encodings)
        ids = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int64, count=int(lengths.sum()))
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)  # each position's text start
        positions = np.arange(ids.size, dtype=np.int64) - starts
        return torch.from_numpy(ids)[None], torch.from_numpy(positions)[None], torch.from_numpy(lengths)

    def packs(self, dtype: DType | torch.dtype | str | None = None) -> bool:
        """Whether ``encode`` packs batches (no padding) in ``dtype``: the inference copy has fused layers
        and the automatic choice would give a packed batch of texts up to ``max_seq_length`` the native
        ``short`` kernel (it runs that dtype and head size here, and such lengths are in its row)."""
        model = self.model_for(self._row(dtype, "packs"))
        if not isinstance(model, BertEngine):
            return False
        heads = self.config.num_attention_heads
        q = torch.empty(1, heads, self.max_seq_length, self.config.hidden_size // heads,
                        dtype=model.dtype)  # one packed row's q (1, H, L, dh), shape only
        with torch.inference_mode():
            backend = select_backend(q, q, q, segments([self.max_seq_length]))
        return backend == "short"

    def _hidden(self, model: BertModel, encodings: list, packed: bool) -> tuple[Tensor, Tensor]:
        """Last hidden states (B, L, d), right-padded, and lengths (B,) for one batch."""
        if not packed:
            ids, lengths = self._batch(encodings)
            return model(ids, lengths=lengths, pool=False).last_hidden_state, lengths
        ids, positions, lengths = self._pack(encodings)
        flat = model(ids, mask=segments(lengths), position_ids=positions, pool=False,
                     backend="short").last_hidden_state[0]  # (T, d)
        keep = keep_positions(lengths, int(lengths.max()))  # (B, L): where each text's tokens go
        hidden = flat.new_zeros(*keep.shape, flat.shape[-1])
        hidden[keep] = flat  # (B, L, d), texts in order, right-padded
        return hidden, lengths

    def encode(self, sentences: Sequence[str] | str, batch_size: int = 64, *,
               dtype: DType | torch.dtype | str | None = None, normalize: bool | None = None,
               progress: bool | None | Callable[[str], object] = False, workers: int | None = None) -> Tensor:
        """Sentence vectors, float32 (n, dim), in the order given; an empty list gives (0, dim).

        Texts longer than ``max_seq_length`` word pieces are truncated to it, with a ``UserWarning``.

        ``dtype``: the compute dtype by name or as the torch dtype (``attnkit.inference.dtypes``), default the
        loaded weights' (``torch.bfloat16`` is faster on CPUs with AVX-512 BF16, cosine >= 0.999 to float32;
        ``"int8"`` or ``torch.int8``: int8 weights, docs/int8.md; outputs are float32 either way).
        ``normalize`` overrides the folder's L2 normalisation.
        ``progress``: a progress bar (tqdm, on stderr) counting the texts encoded; None: plain lines on stdout at
        least every 10 s of a long call; a function: those lines given to it (``attnkit embed`` writes them to
        stderr, its stdout being the vectors); False: nothing (``attnkit.train.progress.counter``).
        ``workers``: batches encoded at once, each on one thread (default: one per torch thread,
        ``torch.get_num_threads()``); 1 runs one batch at a time on all of torch's threads. Several
        single-threaded batches keep every core busy through the serial parts of a layer and skip the
        hand-offs between threads inside each operation (docs/design.md). While they run,
        torch's thread count is 1 for new threads; ``encode`` restores it before returning. Needs ATen's
        OpenMP backend (torch's default); elsewhere it runs one batch at a time.
        """
        sentences = [sentences] if isinstance(sentences, str) else list(sentences)
        row = self._row(dtype, "encode")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"encode: `batch_size` must be a positive integer, got {batch_size!r}")
        streams = stream_count(workers, -(-len(sentences) // batch_size))  # checks `workers` too
        pooling = self.pooling if normalize is None else Pooling(self.pooling.modes, bool(normalize))
        encodings = self.tokenize(sentences, ids_only=True)
        out = torch.empty(len(encodings), self.dim, dtype=torch.float32)
        if not encodings:
            return out
        model, packed = self.model_for(row), self.packs(row)
        batches = plan_batches([len(e.ids) for e in encodings], batch_size)

        def run(idx: list[int]) -> tuple[list[int], Tensor]:
            with torch.inference_mode():  # thread-local: entered in the thread that computes
                hidden, lengths = self._hidden(model, [encodings[i] for i in idx], packed)  # (B, L, d)
                return idx, pool(hidden.float(), lengths, pooling)  # (B, dim)

        threads = torch.get_num_threads()
        executor = None if streams == 1 else ThreadPoolExecutor(
            streams, thread_name_prefix="attnkit-encode", initializer=torch.set_num_threads, initargs=(1,))
        bar = counter("encode", len(encodings), "texts", progress)
        try:  # batches come back in order; each worker runs single-threaded ops
            for idx, vectors in (map if executor is None else executor.map)(run, batches):
                out[torch.as_tensor(idx)] = vectors
                bar.update(len(idx))
        finally:
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)
                torch.set_num_threads(threads)  # the workers set torch's shared count to 1
            bar.close()
        return out

    def similarity(self, a: str, b: str, *, dtype: DType | torch.dtype | str | None = None) -> float:
        """Cosine similarity of two texts' vectors."""
        va, vb = self.encode([a, b], dtype=self._row(dtype, "similarity"))
        return float(F.cosine_similarity(va, vb, dim=0))

    def attend(self, sentence: str) -> Attended:
        """Tokens, every layer's and head's attention weights and the hidden states of one text (float32)."""
        if not isinstance(sentence, str):
            raise ValueError(f"attend: `sentence` must be a str, got {type(sentence).__name__}")
        enc = self.tokenize([sentence])[0]
        ids, lengths = self._batch([enc])
        with torch.inference_mode():
            res = self.model(ids, lengths=lengths, need_weights=True, output_hidden_states=True)
            attentions = torch.stack(res.attentions).squeeze(1)  # N x (1, H, L, L) -> (N, H, L, L)
            hidden = torch.stack(res.hidden_states).squeeze(1)  # (N+1) x (1, L, d) -> (N + 1, L, d)
            embedding = pool(res.last_hidden_state.float(), lengths, self.pooling)[0]
        return Attended(list(enc.tokens), attentions.float(), hidden.float(), embedding)
