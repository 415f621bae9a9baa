"""attnkit's all-MiniLM-L6-v2 against sentence-transformers and Hugging Face's BertModel (float32).

Embeddings: cosine >= 0.99999 on 200+ varied texts (empty, punctuation, non-ASCII, 1 to 256 word
pieces, over-long). Hidden states: max abs difference <= 1e-4 layer by layer. Attention weights:
equal to HF's eager attention probabilities.
"""

import os
import random
import warnings

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("sentence_transformers")
transformers = pytest.importorskip("transformers")

from attnkit.pretrained import builtin_path, load_pretrained  # noqa: E402

SPECIAL = [
    "", " ", "   \t ", ".", "!!!", "?!?!", "...", "-", "(", "[CLS]", "[SEP] [PAD]", "a", "I", "0", "42",
    "3.14159", "e-mail: someone@example.com", "https://example.org/path?q=1&r=2", "#hashtag @user",
    "C'est la vie.", "Grüße aus Köln!", "naïve café résumé", "Ελληνικά γράμματα", "Русский текст здесь",
    "日本語のテキストです。", "中文句子测试", "한국어 문장", "עברית", "العربية", "हिन्दी",
    "emoji 🙂🚀🔥", "tab\tseparated\twords", "new\nline", "ALL CAPS SHOUTING", "MiXeD cAsE",
    "don't won't can't", "x" * 300, "supercalifragilisticexpialidocious", "1 2 3 4 5 6 7 8 9 10",
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "I saw a saw.", "Colorless green ideas sleep furiously.", "¿Dónde está la biblioteca?",
    "Ünïcödé ñ ø å ß", "\u200b zero width", "math: ∑ x_i ≤ ∞", "<html><body>tag</body></html>",
]


def _texts(tokenizer) -> list[str]:
    """SPECIAL + texts of 1 to 254 vocabulary words (+ [CLS]/[SEP] = up to 256 pieces) + too-long ones."""
    vocab = sorted(tokenizer.get_vocab())
    rng = random.Random(1234)
    words = [w for w in vocab if w.isalpha() and not w.startswith("[")]
    pieces = [w for w in vocab if w.startswith("##")]
    out = list(SPECIAL)
    for n in list(range(1, 40)) + list(range(40, 255, 24)) + [254]:  # whole words: ~one piece each
        out.append(" ".join(rng.choice(words) for _ in range(n)))
    for n in range(1, 40):  # made-up words: several pieces each
        out.append(" ".join(rng.choice(words) + rng.choice(pieces)[2:] for _ in range(n)))
    for _ in range(72):  # mixtures of the special texts, some with extra spaces and punctuation
        parts = rng.sample(SPECIAL[:36] + SPECIAL[37:], rng.randint(2, 5))
        out.append(rng.choice([" ", "  ", ", ", " - "]).join(parts) + rng.choice(["", ".", " ?", "!!"]))
    for n in (255, 400):  # longer than the limit: truncated to 256 pieces by both
        out.append(" ".join(rng.choice(words) for _ in range(n)))
    return out


@pytest.fixture(scope="module")
def models():
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer

    path = str(builtin_path("all-MiniLM-L6-v2"))
    ours = load_pretrained("all-MiniLM-L6-v2")
    st = SentenceTransformer(path, device="cpu")
    hf = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    return ours, st, hf


def test_embeddings_equal_sentence_transformers(models):
    ours, st, _ = models
    texts = _texts(ours.tokenizer)
    assert len(texts) >= 200
    lengths = [len(e.ids) for e in ours.tokenize(texts, warn=False)]
    assert min(lengths) == 2 and max(lengths) == 256 and len(set(lengths)) > 60
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mine = ours.encode(texts, batch_size=16)
    assert any("truncated to 256 tokens" in str(w.message) for w in caught)
    theirs = st.encode(texts, batch_size=16, convert_to_tensor=True).float()
    assert mine.dtype == torch.float32 and mine.shape == theirs.shape == (len(texts), 384)
    cos = F.cosine_similarity(mine, theirs, dim=1)
    worst = int(cos.argmin())
    assert float(cos.min()) >= 0.99999, f"text {worst} {texts[worst][:60]!r}: cosine {float(cos.min())}"
    torch.testing.assert_close(mine.norm(dim=1), torch.ones(len(texts)), atol=1e-5, rtol=0)


def test_batching_does_not_change_embeddings(models):
    ours, _, _ = models
    texts = _texts(ours.tokenizer)[:40]
    one = torch.cat([ours.encode([t]) for t in texts[:12]])
    torch.testing.assert_close(ours.encode(texts, batch_size=7)[:12], one, atol=2e-6, rtol=0)


def _hf_inputs(ours, texts):
    encs = ours.tokenize(texts)
    ids, lengths = ours._batch(encs)
    attn = (torch.arange(ids.shape[1])[None] < lengths[:, None]).long()
    return ids, lengths, attn


def test_hidden_states_equal_hf_layer_by_layer(models):
    ours, _, hf = models
    texts = ["I saw a saw.", "A considerably longer sentence, with punctuation; and some more words!", "",
             "Grüße aus Köln 🙂"]
    ids, lengths, attn = _hf_inputs(ours, texts)
    with torch.inference_mode():
        ref = hf(input_ids=ids, attention_mask=attn, output_hidden_states=True)
        got = ours.model(ids, lengths=lengths, output_hidden_states=True)
    assert len(got.hidden_states) == len(ref.hidden_states) == 7
    keep = attn.bool()
    for i, (a, b) in enumerate(zip(got.hidden_states, ref.hidden_states)):
        err = float((a[keep] - b[keep]).abs().max())
        assert err <= 1e-4, f"hidden state {i}: max abs difference {err}"
    assert float((got.pooler_output - ref.pooler_output).abs().max()) <= 1e-4


@pytest.mark.parametrize("text", ["I saw a saw", "The quick brown fox jumps over the lazy dog.", "naïve 日本"])
def test_attention_weights_equal_hf_eager(models, text):
    ours, _, hf = models
    res = ours.attend(text)
    ids, _, attn = _hf_inputs(ours, [text])
    with torch.inference_mode():
        ref = hf(input_ids=ids, attention_mask=attn, output_attentions=True, output_hidden_states=True)
    want = torch.stack(ref.attentions).squeeze(1)  # 6 x (1, 12, L, L) -> (6, 12, L, L)
    assert res.attentions.shape == want.shape == (6, 12, len(res.tokens), len(res.tokens))
    torch.testing.assert_close(res.attentions, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(res.hidden_states, torch.stack(ref.hidden_states).squeeze(1), atol=1e-4, rtol=0)
    torch.testing.assert_close(res.attentions.sum(-1), torch.ones(6, 12, len(res.tokens)), atol=1e-5, rtol=0)


def test_padded_batch_attention_equals_hf_eager(models):
    ours, _, hf = models
    ids, lengths, attn = _hf_inputs(ours, ["short one", "a rather longer sentence than the first one is"])
    with torch.inference_mode():
        ref = hf(input_ids=ids, attention_mask=attn, output_attentions=True)
        got = ours.model(ids, lengths=lengths, need_weights=True)
    for a, b in zip(got.attentions, ref.attentions):  # padded keys get weight 0 in both
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_bfloat16_close_to_float32(models):
    ours, _, _ = models
    texts = _texts(ours.tokenizer)[40:80]
    f32 = ours.encode(texts)
    bf16 = ours.encode(texts, dtype=torch.bfloat16)
    assert bf16.dtype == torch.float32
    assert float(F.cosine_similarity(f32, bf16, dim=1).min()) >= 0.999
