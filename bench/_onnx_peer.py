"""ONNX Runtime peer of sentence embeddings: what sentence-transformers' ``export_dynamic_quantized_onnx_model``
builds, without optimum (which does not install beside this venv's transformers).

The model folder's BERT (transformers ``AutoModel``) is exported with ``torch.onnx.export`` (the TorchScript
exporter; inputs ``input_ids``, ``attention_mask``, ``token_type_ids``, dynamic batch and length; output the last
hidden state), then quantised with ``onnxruntime.quantization.quantize_dynamic`` as optimum's ``avx512_vnni``
dynamic config (``is_static=False``, what sentence-transformers asks for) does: QOperator format, int8 weights
symmetric per channel, uint8 activations per tensor at run time, no reduced range, ORT's default op types for
dynamic quantisation. Sessions run on ``threads`` intra-op threads; texts are tokenised with the folder's
tokenizer, sorted by length and batched as sentence-transformers does, then mean-pooled over the attention
mask and L2-normalised.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np
import torch

QUANT_SETTINGS = ("onnxruntime quantize_dynamic: weights QInt8 symmetric per channel, activations QUInt8 per tensor, "
                  "reduce_range off, QOperator format, ORT's default dynamic op types (MatMul, Gather, ...)")


def missing() -> str | None:
    """None if onnx and onnxruntime import, else one line saying what is missing."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as e:
        return f"ONNX Runtime peer skipped: {e.name} is not installed (pip install onnx onnxruntime)"
    return None


def export(folder: Path, out_dir: Path, reduce_range: bool = False) -> tuple[Path, Path]:
    """(float32 .onnx, int8 .onnx) of the BERT in ``folder``, written in ``out_dir``; ``reduce_range`` quantises the
    weights to 7 bits, ONNX Runtime's advice on CPUs without VNNI, where its u8 x s8 pair products can saturate."""
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out_dir.mkdir(parents=True, exist_ok=True)
    f32, i8 = out_dir / "model.onnx", out_dir / "model_qint8_avx512_vnni.onnx"
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    model = _Hidden(transformers.AutoModel.from_pretrained(folder).eval())
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {0: "batch", 1: "length"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(f32),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                        "last_hidden_state": axes})
    root = logging.getLogger()
    level, root.level = root.level, logging.ERROR  # its advice to pre-process the model, on every call
    try:  # op types: ORT's default for dynamic quantisation, as optimum's dynamic configs pass
        quantize_dynamic(str(f32), str(i8), per_channel=True, reduce_range=reduce_range, weight_type=QuantType.QInt8)
    finally:
        root.level = level
    return f32, i8


class _Hidden(torch.nn.Module):
    """The BERT called with keyword inputs, returning its last hidden state (batch, length, dim)."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids).last_hidden_state


class OrtEncoder:
    """Sentence vectors from an exported .onnx with ONNX Runtime, as sentence-transformers' ONNX backend."""

    def __init__(self, path: Path, folder: Path, threads: int):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        cfg = json.loads((folder / "sentence_bert_config.json").read_text())
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(max_length=int(cfg.get("max_seq_length", 256)))
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(self, texts: list[str], batch_size: int = 64) -> torch.Tensor:
        """(n, dim) float32, L2-normalised, in the order given."""
        order = np.argsort([-len(t) for t in texts], kind="stable")  # sentence-transformers' length sort
        out = [None] * len(texts)
        for i in range(0, len(texts), batch_size):
            idx = order[i:i + batch_size]
            enc = self.tok.encode_batch([texts[j] for j in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for j, v in zip(idx, pooled):
                out[j] = v
        return torch.from_numpy(np.stack(out))
