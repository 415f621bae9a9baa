"""attnkit.load_pretrained(folder) on random Hugging Face MarianMTModel folders of several shapes: the same logits
(to float32 rounding) and, with greedy search and beam search (4 beams), the same tokens as Hugging Face's generate,
on a right-padded batch; and through the sentencepiece tokenizer, the same texts."""

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import attnkit  # noqa: E402
from tests.pretrained.marian_folders import CORPUS, hf_marian, marian_folder, padded_batch  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

SHAPES = {
    # seeds and END biases picked so that the sentences of the batch end at different steps
    "tied-swish": dict(vocab=40, d=32, enc=2, dec=2, heads=4, ffn=64, act="swish", seed=1, eos_bias=3.0),
    "untied-gelu-1+3": dict(vocab=48, d=48, enc=1, dec=3, heads=3, ffn=80, act="gelu", tie=False, seed=0,
                            eos_bias=3.0),
    "separate-vocabs-relu": dict(vocab=36, dec_vocab=44, d=24, enc=2, dec=1, heads=2, ffn=40, act="relu",
                                 share=False, seed=3, eos_bias=8.0, out_std=1.0),
}


@pytest.fixture(scope="module", params=list(SHAPES))
def pair(request, tmp_path_factory):
    hf = hf_marian(**SHAPES[request.param])
    folder = marian_folder(tmp_path_factory.mktemp(request.param), hf)
    return hf, attnkit.load_pretrained(folder)


def test_config_and_sharing_follow_the_folder(pair):
    hf, tr = pair
    c, h = tr.config, hf.config
    assert (c.src_vocab_size, c.tgt_vocab_size) == (h.vocab_size, h.decoder_vocab_size)
    assert c.tie_output == h.tie_word_embeddings
    assert c.share_embeddings == (h.share_encoder_decoder_embeddings and h.tie_word_embeddings)
    assert (c.pad_token_id, c.eos_token_id, c.start_token_id) == (h.pad_token_id, 0, h.decoder_start_token_id)


def test_logits_equal_hugging_face(pair):
    hf, tr = pair
    ids, mask = padded_batch(hf.config.vocab_size, hf.config.pad_token_id)
    dec = torch.randint(1, hf.config.decoder_vocab_size - 1, (ids.shape[0], 6))
    dec[:, 0] = hf.config.decoder_start_token_id
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        ours = tr.model(ids, mask, dec)
    torch.testing.assert_close(ours, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("num_beams", [1, 4])
def test_generate_equals_hugging_face_token_for_token(pair, num_beams):
    hf, tr = pair
    ids, mask = padded_batch(hf.config.vocab_size, hf.config.pad_token_id)
    kw = dict(max_new_tokens=12, num_beams=num_beams, length_penalty=1.0, early_stopping=False)
    with torch.no_grad():
        ref = hf.generate(input_ids=ids, attention_mask=mask, do_sample=False, **kw)  # the folder's forced END too
    out = tr.generate(ids, mask, **kw)
    assert torch.equal(out.sequences, ref), (out.sequences, ref)
    lengths = (ref[:, 1:] != hf.config.pad_token_id).sum(1)
    assert len(set(lengths.tolist())) > 1  # sentences end at different steps


def test_sentencepiece_folder_translates_like_hugging_face(tmp_path):
    hf = hf_marian(vocab=64, seed=4, eos_bias=2.0)
    folder = marian_folder(tmp_path / "spm", hf, tokenizer="spm")
    tr = attnkit.load_pretrained(folder)
    tok = transformers.MarianTokenizer.from_pretrained(folder)
    texts = CORPUS[:3] + ["ein junge", "zwei hunde spielen im schnee mit einem ball"]
    for t in texts:
        assert tr.tokenizer.encode(t) == tok(t).input_ids
    batch = tok(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        ref = hf.generate(**batch, max_new_tokens=10, num_beams=1, do_sample=False)
    want = tok.batch_decode(ref, skip_special_tokens=True)
    assert tr.translate(texts, max_new_tokens=10, num_beams=1) == want
    assert any(w.strip() for w in want)
