"""Random Hugging Face Marian folders for the tests: a MarianMTModel of a given shape, saved with a tokenizer.

``tokenizer="json"`` writes a ``tokenizers`` word-level tokenizer.json; ``"spm"`` trains a tiny sentencepiece
model (the opus-mt layout: source.spm, target.spm, vocab.json). Ids: </s> 0, <unk> 1, pieces, <pad> last.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch

WORDS = ("ein mann fährt fahrrad . zwei hunde spielen im schnee , eine frau liest ein buch auf der bank "
         "kinder laufen am strand und ein junge wirft einen ball").split()
CORPUS = [" ".join(WORDS[i:i + 7]) for i in range(len(WORDS) - 6)] * 4


def hf_marian(*, vocab=40, d=32, enc=2, dec=2, heads=4, ffn=64, act="swish", tie=True, share=True,
              dec_vocab=None, seed=0, eos_bias=4.5, out_std=0.3):
    import transformers

    torch.manual_seed(seed)
    pad = min(vocab, dec_vocab or vocab) - 1
    cfg = transformers.MarianConfig(vocab_size=vocab, decoder_vocab_size=dec_vocab, d_model=d, encoder_layers=enc,
                                    decoder_layers=dec, encoder_attention_heads=heads, decoder_attention_heads=heads,
                                    encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, max_position_embeddings=64,
                                    pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad, dropout=0.0,
                                    attention_dropout=0.0, activation_dropout=0.0, activation_function=act,
                                    scale_embedding=True, tie_word_embeddings=tie,
                                    share_encoder_decoder_embeddings=share)
    hf = transformers.MarianMTModel(cfg).eval()
    with torch.no_grad():  # larger weights than HF's init (std 0.02), so that the source steers the output
        for name, p in hf.named_parameters():
            if p.dim() == 2 and "embed_positions" not in name:
                p.normal_(std=out_std if "embed" in name or "lm_head" in name or "shared" in name
                          else p.shape[1] ** -0.5)
        hf.get_output_embeddings().weight[pad].zero_()
        hf.final_logits_bias.normal_()  # non-zero, so that it is checked
        hf.final_logits_bias[0, pad] = -30.0  # pad is never the best token
        hf.final_logits_bias[0, 0] = eos_bias  # END: sentences end at different lengths
    return hf


def tokenizer_json(vocab: int, path: Path) -> None:
    """Word-level tokenizer over WORDS (+ filler words) with Marian's ids: </s> 0, <unk> 1, ..., <pad> vocab-1."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    words = list(dict.fromkeys(WORDS))[: vocab - 3]
    words += [f"w{i}" for i in range(vocab - 3 - len(words))]
    table = {"</s>": 0, "<unk>": 1, **{w: i + 2 for i, w in enumerate(words)}, "<pad>": vocab - 1}
    tok = Tokenizer(models.WordLevel(table, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens(["</s>", "<unk>", "<pad>"])
    tok.save(str(path))


def spm_files(vocab: int, folder: Path) -> list[str]:
    """Train a sentencepiece model on CORPUS; write source.spm, target.spm, vocab.json. Returns the pieces."""
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=model, vocab_size=vocab - 2,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   bos_id=-1, eos_id=-1, unk_id=0, minloglevel=2)
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [sp.id_to_piece(i) for i in range(1, sp.get_piece_size())]  # skip spm's own <unk>
    table = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    table["<pad>"] = vocab - 1
    assert len(table) <= vocab, (len(table), vocab)
    (folder / "vocab.json").write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "de", "target_lang": "en"}))
    return pieces


def marian_folder(path: Path, hf=None, *, tokenizer: str = "json", **shape) -> Path:
    """Save ``hf`` (or a new ``hf_marian(**shape)``) with a tokenizer into ``path``."""
    hf = hf if hf is not None else hf_marian(**shape)
    path.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(path)
    if tokenizer == "json":
        tokenizer_json(hf.config.vocab_size, path / "tokenizer.json")
    else:
        spm_files(hf.config.vocab_size, path)
    return path


def padded_batch(vocab: int, pad: int, lengths=(9, 6, 4, 7), seed: int = 3):
    """Random source ids (B, S) ending in </s> (0), right-padded with ``pad``, and the mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, pad, (len(lengths), max(lengths)), generator=g)
    mask = torch.ones_like(ids)
    for i, n in enumerate(lengths):
        ids[i, n - 1], ids[i, n:], mask[i, n:] = 0, pad, 0
    return ids, mask
