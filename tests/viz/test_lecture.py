"""The lecture view: the per-head hook gives back each model's own attention and output, and the page
shows the lecture's chain with numbers equal to ``attnkit.explain`` (node for the script's maths, a real
browser for what is drawn after clicking layer, head and token)."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

from attnkit import explain, masks
from attnkit.models.tagger import Tagger, TaggerConfig
from attnkit.nn import Decoder, Encoder, MultiHeadAttention, TransformerConfig
from attnkit.viz.heads import LayerParts, capture_attention, explain_layer, head_parts
from attnkit.viz.labels import token_labels
from attnkit.viz.lecture import lecture_html, model_lecture_html, read_lecture_html
from attnkit.viz.page import read_page_data


def outputs_of(model, run):
    """Every MultiHeadAttention's output and weights while run() runs (the reference the hook must match)."""
    seen = []
    hooks = [m.register_forward_hook(lambda m, a, o: seen.append(o)) for m in model.modules()
             if isinstance(m, MultiHeadAttention)]
    try:
        run()
    finally:
        for h in hooks:
            h.remove()
    return seen


def test_hook_gives_back_minilm_weights_and_outputs(minilm):
    res = {}
    calls = capture_attention(minilm.model, lambda: res.update(a=minilm.attend("I saw a saw.")))
    outs = outputs_of(minilm.model, lambda: minilm.attend("I saw a saw."))
    assert len(calls) == 6 and all(c.key is c.query and c.mask is None for c in calls)
    assert not any(hasattr(m, "_forward_pre_hooks") and m._forward_pre_hooks for m in minilm.model.modules())
    for n, call in enumerate(calls):
        parts = head_parts(call)
        assert parts.q.shape == (12, len(res["a"].tokens), 32) and parts.mask is None
        ex, merged, share = explain_layer(parts)
        torch.testing.assert_close(ex.weights, res["a"].attentions[n], atol=1e-6, rtol=0)
        torch.testing.assert_close(merged, outs[n].out[0], atol=1e-5, rtol=0)  # W^o merges to the layer's output
        assert share.shape == (12, len(res["a"].tokens)) and bool((share > 0).all())


def test_hook_with_rope_pre_ln_padding_and_a_decoder():
    torch.manual_seed(1)
    cfg = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=2, num_decoder_layers=1,
                            dropout=0.0, norm_first=True, positional="rope")
    enc, dec = Encoder(cfg).eval(), Decoder(cfg).eval()
    x, y = torch.randn(2, 5, 16), torch.randn(2, 3, 16)
    pad = masks.padding(torch.tensor([5, 3]))

    def run():
        memory = enc(x, pad).last_hidden_state
        return dec(y, memory, memory_mask=pad, need_weights=True)

    calls = capture_attention(torch.nn.ModuleList([enc, dec]), run)
    outs = outputs_of(torch.nn.ModuleList([enc, dec]), run)
    weights = enc(x, pad, need_weights=True).attentions
    assert len(calls) == 4  # two encoder layers, the decoder's self- and cross-attention
    for n in range(2):  # encoder: example 1 has 2 padded keys
        for b in range(2):
            parts = head_parts(calls[n], example=b)
            ex, merged, _ = explain_layer(parts)
            torch.testing.assert_close(ex.weights, weights[n][b], atol=1e-6, rtol=0)
            torch.testing.assert_close(merged, outs[n].out[b], atol=1e-5, rtol=0)
            assert (parts.mask is None) == (b == 0)
    dec_out = run()
    self_parts, cross_parts = head_parts(calls[2], example=1), head_parts(calls[3], example=1)
    assert self_parts.mask is not None and bool((self_parts.mask == torch.ones(3, 3).tril().bool()).all())
    assert cross_parts.q.shape == (2, 3, 8) and cross_parts.k.shape == (2, 5, 8)
    torch.testing.assert_close(explain_layer(self_parts)[0].weights, dec_out.self_attentions[0][1], atol=1e-6, rtol=0)
    torch.testing.assert_close(explain_layer(cross_parts)[0].weights, dec_out.cross_attentions[0][1],
                               atol=1e-6, rtol=0)


def test_positions_that_add_a_bias_are_refused():
    cfg = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, dropout=0.0, positional="alibi")
    enc = Encoder(cfg).eval()
    calls = capture_attention(enc, lambda: enc(torch.randn(1, 4, 16)))
    with pytest.raises(ValueError, match="adds a bias to the scores"):
        head_parts(calls[0])
    with pytest.raises(ValueError, match="no MultiHeadAttention"):
        capture_attention(torch.nn.Linear(2, 2), lambda: None)


def test_page_checks_its_inputs(tmp_path):
    p = LayerParts(torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(8, 8), None, None)
    with pytest.raises(ValueError, match="2 query labels"):
        lecture_html([p], ["a", "b"], tmp_path / "x.html")
    with pytest.raises(ValueError, match="empty"):
        lecture_html([], [], tmp_path / "x.html")
    q = LayerParts(torch.randn(2, 4, 4), *p[1:])
    with pytest.raises(ValueError, match="same tokens"):
        lecture_html([p, q], ["a", "b", "c"], tmp_path / "x.html")
    d = read_lecture_html(lecture_html([p, p], list("abc"), tmp_path / "ok.html", layer_names=["one", "two"]))
    assert d["layer_names"] == ["one", "two"] and d["q"].shape == (2, 2, 3, 4) and d["scale"] == 0.5
    assert np.array_equal(d["k"][1], p.k.numpy()) and d["masks"] is None and d["layers"][0]["bias"] is False
    # layers of different head counts and scales (the lecture's two examples): per layer, nothing stacked
    one = LayerParts(torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4), None, None, None)
    d = read_lecture_html(lecture_html([one, p], list("abc"), tmp_path / "two.html", scale=[1.0, None]))
    assert [x["scale"] for x in d["layers"]] == [1.0, 0.5] and "q" not in d
    assert d["layers"][0]["merge"] is False and d["layers"][0]["o"].shape == (3, 4)  # no W^o: o^i = b^i
    with pytest.raises(ValueError, match="`scale` has 1 entries for 2 layers"):
        lecture_html([one, p], list("abc"), tmp_path / "x.html", scale=[1.0])
    with pytest.raises(ValueError, match="W\\^q a\\^i is not its q"):
        lecture_html([one], list("abc"), tmp_path / "x.html",
                     matrices=[{"a": torch.randn(3, 5), **{w: torch.randn(1, 4, 5) for w in ("w_q", "w_k", "w_v")}}])


def test_tagger_page_holds_the_models_own_numbers(tmp_path):
    """A tagger (pre-LN, RoPE): the page's q, k, v give the model's own attention weights."""
    torch.manual_seed(0)
    enc = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=2, dropout=0.0, norm_first=True,
                            positional="rope")
    model = Tagger(TaggerConfig(vocab_size=10, char_vocab_size=8, num_tags=3, word_dim=8, char_dim=4,
                                char_channels=6, encoder=enc)).eval()
    words, chars, lengths = torch.tensor([[2, 3, 4, 5]]), torch.randint(1, 8, (1, 4, 3)), torch.tensor([4])
    path = model_lecture_html(model, lambda: model(words, chars, lengths), ["I", "saw", "a", "saw"],
                              tmp_path / "t.html")
    d = read_lecture_html(path)
    _, attn = model(words, chars, lengths, need_weights=True)
    for n in range(2):
        ex = explain(torch.tensor(d["q"][n]), torch.tensor(d["k"][n]), torch.tensor(d["v"][n]))
        torch.testing.assert_close(ex.weights.float(), attn[n][0], atol=1e-5, rtol=0)
    assert "after the rotary position (RoPE) rotation" in d["notes"]


# ---- the page's script: node (light) and Chromium (what is drawn) ------------------------------------

def _static(name):
    from importlib import resources

    return resources.files("attnkit.viz").joinpath("static", name).read_text(encoding="utf-8")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_script_chain_matches_explain_under_node(tmp_path):
    torch.manual_seed(3)
    parts = LayerParts(torch.randn(2, 5, 4), torch.randn(2, 6, 4), torch.randn(2, 6, 3), torch.randn(7, 6), None,
                       torch.rand(5, 6) > 0.3)
    parts.mask[0] = False  # a query with no key to see: zeros, never NaN
    path = lecture_html([parts], list("abcde"), tmp_path / "l.html", keys=list("uvwxyz"))
    data = read_page_data(path)
    program = ("globalThis.window = globalThis;\n" + _static("common.js") + _static("lecture_matrices.js")
               + _static("lecture.js") + "\nfunction start() {}\n"
               + f"const D = {json.dumps(data)};\n"
               + """(async () => {
  const L = D.layers[0];
  for (const k of ["q", "k", "v", "o", "share", "mask"]) L[k] = await unpack(L[k]);
  const out = [];
  for (let h = 0; h < 2; h++) for (let i = 0; i < 5; i++) {
    const c = lectureChain(L, h, i); out.push([Array.from(c.alpha), Array.from(c.p), Array.from(c.b)]);
  }
  console.log(JSON.stringify(out));
})();""")
    (tmp_path / "run.js").write_text(program, encoding="utf-8")
    res = subprocess.run(["node", str(tmp_path / "run.js")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    ex = explain(parts.q, parts.k, parts.v, parts.mask)
    for h in range(2):
        for i in range(5):
            alpha, p, b = got[h * 5 + i]
            np.testing.assert_allclose(alpha, ex.scores[h, i].numpy(), atol=1e-5)
            np.testing.assert_allclose(p, ex.weights[h, i].numpy(), atol=1e-6)
            np.testing.assert_allclose(b, ex.out[h, i].numpy(), atol=1e-5)
    assert got[0][1] == [0.0] * 6 and got[0][2] == [0.0] * 3  # query "a" sees no key


def _numbers(page, selector):
    return [float(x) for x in page.eval(f"[...document.querySelectorAll({json.dumps(selector)})]"
                                        ".map(e => e.textContent)")]


def test_minilm_lecture_page_numbers_equal_explain(tmp_path, minilm, open_page):
    text = "I saw a saw yesterday."
    res = minilm.attend(text)
    labels = token_labels(res.tokens)  # "saw@3": the position as in q^3
    path = model_lecture_html(minilm.model, lambda: minilm.attend(text), labels, tmp_path / "lecture.html")
    calls = capture_attention(minilm.model, lambda: minilm.attend(text))
    outs = outputs_of(minilm.model, lambda: minilm.attend(text))
    page = open_page(path, width=1400)
    tol = 5e-4 + 2e-6  # shown with 3 decimals
    assert page.eval("document.getElementById('where').textContent") == 'layer 1, head 1, query 2 "i@2"'
    for layer, head, token, key in ((2, 4, 3, 1), (5, 11, 0, 6)):
        page.select("#layer", layer)
        page.select("#head", head)
        page.click(f"#tokens button[data-i='{token}']")
        page.click(f"#scores tbody tr[data-j='{key}']")
        where = page.eval("document.getElementById('where').textContent")
        assert where == f'layer {layer + 1}, head {head + 1}, query {token + 1} "{labels[token]}"'
        parts = head_parts(calls[layer])
        ex = explain(parts.q, parts.k, parts.v)  # (H, L, ...): every head of that layer
        q, k = parts.q[head, token], parts.k[head, key]
        assert np.abs(np.array(_numbers(page, "#dot-q .num")) - q.numpy()).max() <= tol
        assert np.abs(np.array(_numbers(page, "#dot-k .num")) - k.numpy()).max() <= tol
        assert np.abs(np.array(_numbers(page, "#dot-prod .num")) - (q * k).numpy()).max() <= tol
        assert np.abs(np.array(_numbers(page, "#scores td.alpha")) - ex.scores[head, token].numpy()).max() <= tol
        assert np.abs(np.array(_numbers(page, "#scores td.alphap")) - ex.weights[head, token].numpy()).max() <= tol
        assert np.abs(np.array(_numbers(page, "#scores td.alphap")) - res.attentions[layer, head, token].numpy()
                      ).max() <= tol
        assert np.abs(np.array(_numbers(page, "#bvec .num")) - ex.out[head, token].numpy()).max() <= tol
        o = _numbers(page, "#ovec .num")
        assert len(o) == 12 and np.abs(np.array(o) - outs[layer].out[0, token, :12].numpy()).max() <= tol
        # the head table: a click on another head follows its chain
        page.click(f"#heads-table tbody tr[data-h='{(head + 1) % 12}']")
        assert page.eval("document.getElementById('head').value") == str((head + 1) % 12)
    assert re.search(r"\u03b1'_ij = softmax", page.eval("document.body.textContent"))


def test_cross_attention_lecture_of_a_decoder(tmp_path):
    """keys=: the page holds each decoder layer's cross-attention (target queries, source keys)."""
    torch.manual_seed(4)
    cfg = TransformerConfig(d_model=16, num_heads=4, d_ff=32, num_encoder_layers=1, num_decoder_layers=2,
                            dropout=0.0)
    dec = Decoder(cfg).eval()
    memory, y = torch.randn(1, 5, 16), torch.randn(1, 3, 16)
    path = model_lecture_html(dec, lambda: dec(y, memory), ["the", "dog", "</s>"], tmp_path / "x.html",
                              keys=["der", "Hund", "bellt", ".", "</s>"])
    d = read_lecture_html(path)
    weights = dec(y, memory, need_weights=True).cross_attentions
    assert d["layer_names"] == ["cross-attention layer 1", "cross-attention layer 2"] and d["k"].shape == (2, 4, 5, 4)
    for n in range(2):
        ex = explain(torch.tensor(d["q"][n]), torch.tensor(d["k"][n]), torch.tensor(d["v"][n]))
        torch.testing.assert_close(ex.weights.float(), weights[n][0], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="no cross-attention call from 3 queries to 2 keys"):
        model_lecture_html(dec, lambda: dec(y, memory), ["a", "b", "c"], tmp_path / "y.html", keys=["x", "y"])


def test_masked_keys_are_shown_as_masked_with_zero_weight(tmp_path, open_page):
    """A decoder's causal self-attention: query i sees keys 1..i; a future key reads "masked", its alpha' is 0
    and the page says so; every visible number equals attnkit.explain with the same mask."""
    torch.manual_seed(5)
    causal = torch.ones(4, 4).tril().bool()  # True = may attend
    parts = LayerParts(torch.randn(2, 4, 3), torch.randn(2, 4, 3), torch.randn(2, 4, 3), torch.randn(5, 6), None,
                       causal)
    path = lecture_html([parts], ["<s>", "the", "dog", "the"], tmp_path / "causal.html")
    ex = explain(parts.q, parts.k, parts.v, parts.mask)
    page = open_page(path, width=1300)
    page.click("#tokens button[data-i='1']")  # "the@2": keys 3 and 4 are its future
    rows = page.eval("[...document.querySelectorAll('#scores tbody tr')].map(r => [...r.cells].map(c => "
                     "c.textContent))")
    assert [r[0] for r in rows] == ["1 <s>@1", "2 the@2", "3 dog@3", "4 the@4"]  # the repeated word told apart
    assert [r[3] for r in rows[2:]] == ["masked", "masked"]
    assert [r[5] for r in rows[2:]] == ["masked: \u03b1'_ij = 0"] * 2
    assert [float(r[4]) for r in rows] == pytest.approx(ex.weights[0, 1].tolist(), abs=5e-4)
    assert "2 of the 4 keys are masked for q^2" in page.eval("document.getElementById('masked-note').textContent")
    a = page.eval("[...document.querySelectorAll('#m-A tbody tr')].map(r => [...r.querySelectorAll('td')]"
                  ".map(c => c.textContent))")  # row j: key k^j, column i: query q^i
    assert a[3][:3] == ["masked"] * 3 and float(a[3][3]) == pytest.approx(float(ex.scores[0, 3, 3]), abs=5e-4)
    ap = np.array(page.eval("[...document.querySelectorAll('#m-Ap tbody tr:not(.sum)')].map(r => "
                            "[...r.querySelectorAll('td')].map(c => +c.textContent))"))
    assert np.abs(ap - ex.weights[0].T.numpy()).max() <= 5e-4 and (ap[np.triu_indices(4, 1)[::-1]] == 0).all()
    assert "a masked key gets \u03b1' = 0" in page.eval("document.getElementById('matrices').textContent")
    assert page.eval("document.querySelectorAll('#m-Ap td.masked').length") == 6
