"""``export_marian(model, tokenizer, folder)``: an attnkit ``Seq2SeqModel`` -> a Hugging Face Marian folder.

The folder (``config.json``, ``generation_config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``) loads in Hugging Face (``MarianMTModel.from_pretrained``, ``AutoTokenizer``),
converts with CTranslate2's ``ct2-transformers-converter``, and loads back into attnkit. The same
network, exactly, with three changes of form that Marian's layout asks for:

- token ids: Marian keeps ``<pad>`` last (CTranslate2 drops the last row, taking it for padding), so
  ids move: pad goes to the end, the others shift down by one; the tokenizer file is renumbered alike;
- the decoder's first input: Marian starts from the pad token, whose embedding is zero (CTranslate2
  starts from a zero vector whatever the table says), so the start token's scaled embedding is added
  to row 0 of the decoder's stored position table, which only the first step reads;
- positions: Marian's sinusoidal table puts all sines first, then all cosines ("halves"). A model
  trained with the interleaved table gets its model dimensions permuted (embedding columns, every
  weight that reads or writes the residual stream, LayerNorm parameters): the same function.

Marian is post-LN without a final LayerNorm; pre-LN runs cannot be written in its layout (ValueError).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import Tensor

from ...functional.positional import sinusoidal_table
from ...inference import spec_tensors
from ...models.nat import NATModel
from ...models.seq2seq import Seq2SeqModel
from ...outputs import check_replaceable, write_folder, writing
from .layout import ATTENTION, EXPORT_ACTIVATIONS, layer_names, spec_to_hf

__all__ = ["export_marian", "check_exportable"]

SPECIALS = {"pad": "<pad>", "eos": "</s>", "unk": "<unk>"}


def check_exportable(model: Seq2SeqModel) -> None:
    """ValueError naming what Marian's layout cannot hold."""
    if not isinstance(model, Seq2SeqModel) or isinstance(model, NATModel):
        raise ValueError(f"export --format marian: a {type(model).__name__} cannot be written as Marian, which holds "
                         f"autoregressive encoder-decoder models (a Seq2SeqModel) only")
    cfg, tc = model.config, model.config.transformer
    problems = []
    if tc.norm_first or tc.use_final_norm:
        problems.append("the run is pre-LN (norm_first=True, with a final LayerNorm); Marian (Hugging Face "
                        "MarianMTModel, CTranslate2) runs post-LN stacks only")
    if tc.positional != "sinusoidal":
        problems.append(f"positional {tc.positional!r}: Marian has sinusoidal positions only")
    if tc.activation not in EXPORT_ACTIVATIONS:
        problems.append(f"activation {tc.activation!r} has no Marian name")
    if not tc.bias or tc.layer_norm_eps != 1e-5:
        problems.append("Marian needs biases and LayerNorm eps 1e-5")
    if cfg.src_vocab_size != cfg.tgt_vocab_size:
        problems.append("Marian export needs one joint vocabulary (src_vocab_size == tgt_vocab_size)")
    if problems:
        raise ValueError("export --format marian: " + "; ".join(problems))


def _new_ids(vocab: int, pad: int) -> Tensor:
    """order (V,): new id i holds old id order[i]; pad goes last."""
    return torch.cat((torch.arange(pad), torch.arange(pad + 1, vocab), torch.tensor([pad])))


def _residual_permutation(state: dict[str, Tensor], model: Seq2SeqModel, perm: Tensor) -> dict[str, Tensor]:
    """Permute the model dimension of every tensor on the residual stream (interleaved -> halves layout)."""
    out = dict(state)
    for hf, _, fields in layer_names(model.config):
        for a in ATTENTION:
            if f"{hf}.{a}.q_proj.weight" not in out:
                continue  # the encoder's layers have no encoder_attn
            for x in "qkv":
                out[f"{hf}.{a}.{x}_proj.weight"] = out[f"{hf}.{a}.{x}_proj.weight"][:, perm]  # reads the stream
            for p in ("weight", "bias"):
                w = out[f"{hf}.{a}.out_proj.{p}"]
                out[f"{hf}.{a}.out_proj.{p}"] = w[perm]  # writes the stream
        out[f"{hf}.fc1.weight"] = out[f"{hf}.fc1.weight"][:, perm]
        out[f"{hf}.fc2.weight"], out[f"{hf}.fc2.bias"] = out[f"{hf}.fc2.weight"][perm], out[f"{hf}.fc2.bias"][perm]
        for name in (m[0] for f, m in fields.items() if f.endswith("norm")):
            for p in ("weight", "bias"):
                out[f"{hf}.{name}.{p}"] = out[f"{hf}.{name}.{p}"][perm]
    return out


def _tokenizer_json(tokenizer, order: Tensor, max_length: int) -> dict:
    """The ``tokenizers`` file renumbered (new id = position in ``order``), END appended to every text, texts cut
    to ``max_length`` tokens (END included)."""
    data = json.loads(tokenizer.to_str())
    new_of_old = {int(old): new for new, old in enumerate(order.tolist())}
    model = data.get("model", {})
    if not isinstance(model.get("vocab"), dict):
        raise ValueError(f"export --format marian: a {model.get('type')!r} tokenizer has no piece -> id vocabulary")
    model["vocab"] = {piece: new_of_old[i] for piece, i in model["vocab"].items()}
    for t in data.get("added_tokens", []):
        t["id"] = new_of_old[t["id"]]
    eos = model["vocab"][SPECIALS["eos"]]
    data["post_processor"] = {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                                                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                              "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}},
                                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                              "special_tokens": {"</s>": {"id": "</s>", "ids": [eos], "tokens": ["</s>"]}}}
    # texts are cut as the run cut them: max_length tokens with END (so HF and CTranslate2 read the same ids)
    data["truncation"] = {"direction": "Right", "max_length": max_length, "strategy": "LongestFirst", "stride": 0}
    data["padding"] = None
    return data


def _hf_config(model: Seq2SeqModel, pad: int, eos: int, suppress: list[int], n_pos: int) -> tuple[dict, dict]:
    cfg, tc = model.config, model.config.transformer
    config = {
        "architectures": ["MarianMTModel"], "model_type": "marian", "vocab_size": cfg.src_vocab_size,
        "decoder_vocab_size": cfg.tgt_vocab_size, "d_model": tc.d_model, "encoder_layers": tc.num_encoder_layers,
        "decoder_layers": tc.num_decoder_layers, "encoder_attention_heads": tc.num_heads,
        "decoder_attention_heads": tc.num_heads, "encoder_ffn_dim": tc.d_ff, "decoder_ffn_dim": tc.d_ff,
        "activation_function": EXPORT_ACTIVATIONS[tc.activation], "max_position_embeddings": n_pos,
        "scale_embedding": cfg.scale_embedding, "pad_token_id": pad, "eos_token_id": eos,
        "decoder_start_token_id": pad, "forced_eos_token_id": None, "bos_token_id": None,
        "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0, "is_encoder_decoder": True,
        "use_cache": True, "dtype": "float32",
    }
    generation = {"decoder_start_token_id": pad, "eos_token_id": eos, "pad_token_id": pad,
                  "forced_eos_token_id": None, "bad_words_ids": [[i] for i in suppress], "num_beams": 1,
                  "max_length": cfg.max_positions}
    return config, generation


def _tokenizer_vocab(tokenizer, cfg) -> dict[str, int]:
    """The tokenizer's vocabulary (added tokens included), once checked against the model's ids and size."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    missing = [t for t in SPECIALS.values() if t not in vocab]
    if missing:
        raise ValueError(f"export --format marian: the tokenizer has no {missing} token")
    if vocab[SPECIALS["pad"]] != cfg.pad_token_id or vocab[SPECIALS["eos"]] != cfg.eos_token_id:
        raise ValueError("export --format marian: the tokenizer's <pad> / </s> ids are not the model's pad / eos ids")
    if tokenizer.get_vocab_size(with_added_tokens=True) != cfg.tgt_vocab_size:
        raise ValueError(f"export --format marian: the tokenizer has {tokenizer.get_vocab_size()} tokens, the model "
                         f"{cfg.tgt_vocab_size}")
    return vocab


def _hf_tensors(model: Seq2SeqModel, order: Tensor, pad: int) -> tuple[dict[str, Tensor], int]:
    """Marian's tensors of ``model`` (float32; vocabulary rows in ``order``, the pad row ``pad``) and the
    position table's length. Shared / tied tables are one tensor under each of their names."""
    cfg, tc = model.config, model.config.transformer
    spec = spec_tensors(model, torch.float32)  # the model's tensors by the weight spec's names
    hf = spec_to_hf(spec, cfg)
    d, scale = tc.d_model, (tc.d_model ** 0.5 if cfg.scale_embedding else 1.0)
    src, tgt, out = spec["source_embedding"], spec["target_embedding"], spec["output.weight"]
    n_pos = max(cfg.max_positions, 512)  # the table is a pure function of position: room to spare for HF / CT2
    positions = sinusoidal_table(n_pos, d, layout="halves")  # written in Marian's layout
    dec_positions = positions.clone()
    start_vec = scale * tgt[cfg.start_token_id]  # in the run's own layout
    if tc.sinusoidal_layout == "interleaved":
        perm = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))  # halves[j] = interleaved[perm[j]]
        hf = _residual_permutation(hf, model, perm)
        src, tgt, out, start_vec = src[:, perm], tgt[:, perm], out[:, perm], start_vec[perm]
    dec_positions[0] += start_vec
    src, tgt, out = src[order].clone(), tgt[order].clone(), out[order].clone()
    tgt[pad] = 0.0  # the decoder starts from the pad token's zero embedding
    if cfg.share_embeddings:
        src = tgt  # one table; the pad row only ever meets masked keys in the encoder
    if cfg.tie_output:
        out = tgt  # pad's logit is then its bias alone; pad is never generated (bad_words_ids)
    bias = spec["output.bias"][order] if "output.bias" in spec else torch.zeros(cfg.tgt_vocab_size)
    if src is tgt:
        hf["model.shared.weight"] = src
    hf["model.encoder.embed_tokens.weight"], hf["model.decoder.embed_tokens.weight"] = src, tgt
    hf["lm_head.weight"] = out
    hf["final_logits_bias"] = bias[None]
    hf["model.encoder.embed_positions.weight"], hf["model.decoder.embed_positions.weight"] = positions, dec_positions
    return hf, n_pos


def export_marian(model: Seq2SeqModel, tokenizer, folder: str | Path, *, suppress: tuple[str, ...] = ("<s>", "<unk>"),
                  overwrite: bool = False, keep: Iterable[tuple[str, Path]] = ()) -> Path:
    """Write ``model`` (any dtype; saved as float32) and its ``tokenizers.Tokenizer`` as a Marian folder.

    ``suppress``: tokens never to generate besides ``<pad>`` (written as ``bad_words_ids``). The folder is
    written to a temporary sibling and renamed into place (``attnkit.outputs.write_folder``), so it is never
    half-written. ``folder`` must be new, empty, or (with ``overwrite``) an earlier export that holds only
    its own files; anything else, ``/``, the home and current folders and the folders in ``keep``
    ((description, path) pairs, e.g. the run exported) are refused with a ValueError before anything is done.
    """
    keep = list(keep)
    check_replaceable(folder, overwrite=overwrite, keep=keep, what="export")  # before the work, and again at the end
    check_exportable(model)
    cfg = model.config
    vocab = _tokenizer_vocab(tokenizer, cfg)
    order = _new_ids(cfg.tgt_vocab_size, cfg.pad_token_id)
    new_of_old = torch.empty_like(order)
    new_of_old[order] = torch.arange(len(order))
    pad, eos = cfg.tgt_vocab_size - 1, int(new_of_old[cfg.eos_token_id])
    hf, n_pos = _hf_tensors(model, order, pad)
    suppress_ids = [pad] + [int(new_of_old[vocab[t]]) for t in suppress if t in vocab]
    config, generation = _hf_config(model, pad, eos, suppress_ids, n_pos)
    tgt = hf["model.decoder.embed_tokens.weight"]
    config["tie_word_embeddings"] = hf["lm_head.weight"] is tgt
    config["share_encoder_decoder_embeddings"] = hf["model.encoder.embed_tokens.weight"] is tgt

    files = {"config.json": config, "generation_config.json": generation,
             "tokenizer.json": _tokenizer_json(tokenizer, order, cfg.max_positions),
             "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>",
                                       "unk_token": "<unk>", "pad_token": "<pad>",
                                       "model_max_length": cfg.max_positions}}

    def write(tmp: Path) -> None:
        from safetensors.torch import save_file

        with writing(tmp / "model.safetensors"):
            save_file({k: v.contiguous() for k, v in _untie(hf).items()}, str(tmp / "model.safetensors"),
                      metadata={"format": "pt"})
        for name, data in files.items():
            with writing(tmp / name):
                (tmp / name).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    return write_folder(folder, write, overwrite=overwrite, keep=keep, what="export",
                        info={"format": "marian"})


def _untie(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """safetensors refuses tensors that share memory: give each name its own copy."""
    seen, out = set(), {}
    for k, v in state.items():
        out[k] = v.clone() if v.data_ptr() in seen else v
        seen.add(v.data_ptr())
    return out
