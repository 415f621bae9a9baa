"""Nothing in Seq2SeqModel or generate blocks Marian (opus-mt) checkpoints: a random Hugging Face MarianMTModel's
weights, renamed here (the loader itself is the next issue's), give the same logits, and greedy / beam search
give the same tokens as Hugging Face's generate."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnkit.generation import generate  # noqa: E402
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel  # noqa: E402
from attnkit.nn import TransformerConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

V, PAD, EOS = 40, 39, 0


def marian(seed: int = 0, eos_bias: float = 1.0):
    torch.manual_seed(seed)
    cfg = transformers.MarianConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
                                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                    decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=PAD,
                                    eos_token_id=EOS, decoder_start_token_id=PAD, dropout=0.0,
                                    attention_dropout=0.0, activation_dropout=0.0, activation_function="swish",
                                    scale_embedding=True,  # as the opus-mt configs set them
                                    tie_word_embeddings=False)  # separate tables, so each mapping is checked
    hf = transformers.MarianMTModel(cfg).eval()
    with torch.no_grad():
        hf.final_logits_bias.normal_()  # a non-zero bias, so that it is checked too
        hf.lm_head.weight.normal_(std=0.3)  # peaky distributions: sentences end at different lengths
        hf.final_logits_bias[0, EOS] = eos_bias
    return hf


def ours_from(hf) -> Seq2SeqModel:
    c = hf.config
    assert c.activation_function == "swish" and c.scale_embedding
    tc = TransformerConfig(d_model=c.d_model, num_heads=c.encoder_attention_heads, d_ff=c.encoder_ffn_dim,
                           num_encoder_layers=c.encoder_layers, num_decoder_layers=c.decoder_layers, dropout=0.0,
                           activation="silu", norm_first=False, sinusoidal_layout="halves",
                           max_len=c.max_position_embeddings)
    cfg = Seq2SeqConfig(c.vocab_size, c.vocab_size, tc, pad_token_id=c.pad_token_id, bos_token_id=c.pad_token_id,
                        eos_token_id=c.eos_token_id, decoder_start_token_id=c.decoder_start_token_id,
                        share_embeddings=c.tie_word_embeddings, tie_output=c.tie_word_embeddings,
                        scale_embedding=True, final_logits_bias=True,
                        max_positions=c.max_position_embeddings)
    m = Seq2SeqModel(cfg).eval()
    sd = hf.state_dict()
    new = {"src_embed.weight": sd["model.shared.weight"], "final_logits_bias": sd["final_logits_bias"][0]}
    if not c.tie_word_embeddings:  # (transformers 5 then unties the encoder's and decoder's tables too)
        new.update({"src_embed.weight": sd["model.encoder.embed_tokens.weight"],
                    "tgt_embed.weight": sd["model.decoder.embed_tokens.weight"],
                    "lm_head.weight": sd["lm_head.weight"]})

    def attn(ours, theirs):
        new[f"{ours}.in_proj.weight"] = torch.cat([sd[f"{theirs}.{p}_proj.weight"] for p in "qkv"])
        new[f"{ours}.in_proj.bias"] = torch.cat([sd[f"{theirs}.{p}_proj.bias"] for p in "qkv"])
        for p in ("weight", "bias"):
            new[f"{ours}.out_proj.{p}"] = sd[f"{theirs}.out_proj.{p}"]

    def norm_ff(ours, theirs, blocks):
        for p in ("weight", "bias"):
            for mine, hf_name in blocks:
                new[f"{ours}.{mine}.norm.{p}"] = sd[f"{theirs}.{hf_name}.{p}"]
            new[f"{ours}.ff.linear1.{p}"] = sd[f"{theirs}.fc1.{p}"]
            new[f"{ours}.ff.linear2.{p}"] = sd[f"{theirs}.fc2.{p}"]

    for i in range(c.encoder_layers):
        attn(f"encoder.layers.{i}.self_attn", f"model.encoder.layers.{i}.self_attn")
        norm_ff(f"encoder.layers.{i}", f"model.encoder.layers.{i}",
                [("attn_block", "self_attn_layer_norm"), ("ff_block", "final_layer_norm")])
    for i in range(c.decoder_layers):
        attn(f"decoder.layers.{i}.self_attn", f"model.decoder.layers.{i}.self_attn")
        attn(f"decoder.layers.{i}.cross_attn", f"model.decoder.layers.{i}.encoder_attn")
        norm_ff(f"decoder.layers.{i}", f"model.decoder.layers.{i}",
                [("self_block", "self_attn_layer_norm"), ("cross_block", "encoder_attn_layer_norm"),
                 ("ff_block", "final_layer_norm")])
    m.load_state_dict(new, strict=True)
    torch.testing.assert_close(m.encoder.position.table[:64], sd["model.encoder.embed_positions.weight"])
    return m


def batch():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, V - 1, (4, 9), generator=g)
    mask = torch.ones_like(ids)
    for i, n in enumerate((9, 6, 4, 7)):
        ids[i, n - 1], ids[i, n:], mask[i, n:] = EOS, PAD, 0
    return ids, mask


def test_logits_equal_hugging_face_marian():
    hf = marian()
    m = ours_from(hf)
    ids, mask = batch()
    dec = torch.randint(1, V - 1, (4, 5))
    dec[:, 0] = PAD
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        ours = m(ids, mask, dec)
    torch.testing.assert_close(ours, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("seed,eos_bias", [(0, 4.5), (3, 5.5), (3, 3.5)])
def test_generate_equals_hugging_face_token_for_token(num_beams, seed, eos_bias):
    hf = marian(seed, eos_bias)
    m = ours_from(hf)
    ids, mask = batch()
    kw = dict(max_new_tokens=12, num_beams=num_beams, length_penalty=1.0, early_stopping=False)
    with torch.no_grad():
        ref = hf.generate(input_ids=ids, attention_mask=mask, do_sample=False, forced_eos_token_id=None, **kw)
    out = generate(m, ids, mask, **kw)
    assert torch.equal(out.sequences, ref), (out.sequences, ref)
    torch.testing.assert_close(out.sequences_scores, ref_scores(hf, ids, mask, kw), atol=1e-4, rtol=1e-4)



@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("renormalize", [False, True])
def test_forced_end_and_renormalised_scores_equal_hugging_face(num_beams, renormalize):
    """Issue 65: a Marian folder's forced_eos_token_id (END at the last step) and renormalize_logits, honoured."""
    hf = marian(3, 3.5)
    m = ours_from(hf)
    ids, mask = batch()
    kw = dict(max_new_tokens=6, num_beams=num_beams, length_penalty=1.0, early_stopping=False,
              forced_eos_token_id=EOS, renormalize_logits=renormalize, suppress_tokens=[7])
    hf_kw = {k: v for k, v in kw.items() if k != "suppress_tokens"}
    with torch.no_grad():
        res = hf.generate(input_ids=ids, attention_mask=mask, do_sample=False, bad_words_ids=[[7]],
                          return_dict_in_generate=True, output_scores=True, **hf_kw)
    out = generate(m, ids, mask, **kw)
    assert torch.equal(out.sequences, res.sequences), (out.sequences, res.sequences)
    assert (out.sequences[:, -1] == EOS).any()  # some hypotheses were cut at the limit: their last token is END
    if num_beams > 1:
        torch.testing.assert_close(out.sequences_scores, res.sequences_scores, atol=1e-4, rtol=1e-4)


def ref_scores(hf, ids, mask, kw):
    """Hugging Face's sequences_scores (beam search), or the greedy log-probabilities normalised the same way."""
    with torch.no_grad():
        res = hf.generate(input_ids=ids, attention_mask=mask, do_sample=False, forced_eos_token_id=None,
                          return_dict_in_generate=True, output_scores=True, **kw)
    if kw["num_beams"] > 1:
        return res.sequences_scores
    steps = hf.compute_transition_scores(res.sequences, res.scores, normalize_logits=True)  # (B, T)
    gen = res.sequences[:, 1:]
    alive = torch.ones_like(gen, dtype=torch.bool)
    alive[:, 1:] = (gen[:, :-1] != EOS).cumprod(1).bool()  # up to and including END
    return (steps * alive).sum(1) / alive.sum(1)
