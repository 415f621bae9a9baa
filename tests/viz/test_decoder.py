"""The decoder, seen: `translate --attention` writes the encoder's, the decoder's (masked) and the cross-attention as
tabs of one page, for a trained run, a NAT run and a Marian folder; the weights are the model's own (its public
calls with need_weights), the masked triangle is drawn, and the tabs work in Chromium."""

import numpy as np
import pytest
import torch

import attnkit
from attnkit import explain
from attnkit.cli.main import main
from attnkit.viz.decoder import read_decoder_html
from attnkit.viz.lecture import read_lecture_html
from attnkit.viz.translation import decoder_page
from tests.pretrained.translation_run import make_run
from tests.tasks.corpus import write_corpus

TEXT = "Ein mann sieht ein auto."
TINY = ["--d-model", "32", "--num-heads", "2", "--d-ff", "64", "--num-encoder-layers", "1", "--num-decoder-layers",
        "2", "--no-progress", "--vocab-size", "60", "--batch-tokens", "400", "--warmup-steps", "2", "--average", "0",
        "--threads", "1"]


def nat_run(folder):
    """A NAT run trained for 3 steps on the tests' generated corpus (seconds)."""
    c = write_corpus(folder / "corpus", n_train=60, n_dev=4)
    assert main(["train", "translate", "--train-src", str(c["train_src"]), "--train-tgt", str(c["train_tgt"]),
                 "--dev-src", str(c["dev_src"]), "--dev-tgt", str(c["dev_tgt"]), *TINY, "--max-steps", "3",
                 "--decoder", "nat", "--iterations", "2", "--out", str(folder / "nat")]) == 0
    return folder / "nat"


def own_weights(model, ids, mask, rows, nat=False):
    """Every layer's weights from the model's public calls: encoder (L, H, S, S), decoder (L, H, T, T), cross."""
    with torch.no_grad():
        x = model.src_embed(ids) * model.embed_scale
        enc = model.encoder(x, None, need_weights=True).attentions
        memory = model.encode(ids, mask)
        out = model.decode_parallel(rows, memory, mask, output_attentions=True) if nat else \
            model.decode(rows, memory, mask, output_attentions=True)
    return [torch.stack([a[0] for a in w]).numpy() for w in (enc, out.self_attentions, out.cross_attentions)]


def check_page(page, tr, text, nat=False, **kw):
    """The page's tabs hold the model's own weights for its translation, labelled as the decoder reads them."""
    al, ids, mask, rows = tr._attend(text, kw)
    d = read_decoder_html(page)
    enc, dec, cross = (t["weights"] for t in d["tabs"])
    for got, want in zip((enc, dec, cross), own_weights(tr.model, ids, mask, rows, nat)):
        assert got.shape == want.shape and np.abs(got - want).max() <= 5e-5 + 1e-6
    t = dec.shape[-1]
    inputs = [tr._piece(i) for i in rows[0].tolist()]
    positions = al.target if nat and inputs == al.target else [f"{i}\u2192{o}" for i, o in zip(inputs, al.target)]
    assert d["tabs"][0]["queries"] == al.source  # a decoder position has one label in both of its tabs:
    assert d["tabs"][1]["queries"] == d["tabs"][1]["keys"] == d["tabs"][2]["queries"] == positions  # in -> out
    assert d["causal"] == (not nat)
    if nat:
        assert d["tabs"][1]["mask"] is None and d["tabs"][1]["name"] == "decoder self-attention (not masked)"
    else:  # the cross tab equals the attention recorded while decoding step by step (generate, K/V cache)
        assert np.abs(cross - al.weights.numpy()).max() <= 5e-5 + 1e-6  # stored to 4 decimals, float32 noise
        # position i sees inputs 1..i: the masked triangle has weight 0
        assert np.array_equal(d["tabs"][1]["mask"], np.tril(np.ones((t, t))))
        assert (dec[..., np.triu_indices(t, 1)[0], np.triu_indices(t, 1)[1]] == 0).all()
        assert d["tabs"][1]["name"] == "decoder self-attention (masked)"
    return d


def test_tabs_of_a_trained_run_in_chromium(tmp_path, open_page):
    run = make_run(tmp_path / "ar")
    assert main(["translate", str(run), TEXT, "--attention", str(tmp_path / "att"), "--max-new-tokens", "7"]) == 0
    tr = attnkit.load_pretrained(run)
    d = check_page(tmp_path / "att" / "attention_0.html", tr, TEXT, max_new_tokens=7)
    s, t = len(d["tabs"][0]["queries"]), len(d["tabs"][1]["queries"])
    page = open_page(tmp_path / "att" / "attention_0.html", width=1300)
    assert page.eval("document.body.dataset.tab") == "1"  # the decoder's self-attention first
    assert page.eval("document.querySelector('#tabs button.sel').textContent") == "decoder self-attention (masked)"
    assert page.eval("document.querySelectorAll('#matrix td.masked').length") == t * (t - 1) // 2
    assert page.eval("[...document.querySelectorAll('#matrix td.masked')].every(c => +c.dataset.j > +c.dataset.i)")
    # a thumbnail's masked cell is grey, a visible one is a shade of blue (white to dark blue)
    px = page.eval("(() => { const c = document.querySelector('#thumbs canvas'), x = c.getContext('2d'); "
                   f"return [[...x.getImageData({t - 1}, 0, 1, 1).data], [...x.getImageData(0, 0, 1, 1).data]]; }})()")
    assert px[0][:3] == [208, 208, 208] and px[1][:3] != [208, 208, 208]
    page.click("#thumbs canvas[data-layer='1'][data-head='1']")  # decoder layer 2, head 2 alone
    cells = page.eval("[...document.querySelectorAll('#matrix td')].map(c => +c.dataset.w)")
    assert np.abs(np.array(cells).reshape(t, t) - d["tabs"][1]["weights"][1, 1]).max() < 1e-9
    assert "future" in page.eval("document.getElementById('thumbs-legend').textContent")
    page.click("#tabs button[data-tab='0']")  # the encoder: source x source, nothing masked
    assert page.eval("document.body.dataset.tab") == "0"
    assert page.eval("document.querySelectorAll('#matrix td').length") == s * s
    assert page.eval("document.querySelectorAll('#matrix td.masked, #layer option').length") == 2  # 2 layers, no mask
    assert page.eval("document.getElementById('tab-note').textContent").startswith("The encoder's self-attention")
    page.click("#tabs button[data-tab='2']")  # cross: a row per target token, a column per source piece
    assert page.eval("document.querySelectorAll('#matrix tbody tr').length") == t
    assert page.eval("document.querySelectorAll('#matrix thead th').length") == s + 1
    mean = page.eval("[...document.querySelectorAll('#matrix td')].map(c => +c.dataset.w)")
    want = d["tabs"][2]["weights"][0].mean(0)  # layer 1, the mean of the heads ticked (all)
    assert np.abs(np.array(mean).reshape(t, s) - want).max() < 1e-9
    assert page.eval("document.querySelectorAll('#lines-head text.side')[0].textContent") == "source (key)"
    end, width = page.eval("(() => { const t = document.querySelectorAll('#lines-head text.side')[1].getBBox(); "
                           "return [t.x + t.width, +document.getElementById('lines-head').getAttribute('width')]; })()")
    assert end <= width  # "target (query)" whole, not clipped
    # the lecture page of the decoder's masked self-attention: q^2 sees k^1, k^2; its later keys read "masked"
    lec = read_lecture_html(tmp_path / "att" / "decoder_self_attention_0_lecture.html")
    assert lec["queries"] == d["tabs"][1]["queries"] and np.array_equal(lec["masks"][0], np.tril(np.ones((t, t))))
    ex = explain(torch.tensor(lec["q"][1, 0]), torch.tensor(lec["k"][1, 0]), torch.tensor(lec["v"][1, 0]),
                 torch.tensor(lec["masks"][1]).bool())
    assert np.abs(ex.weights.numpy() - d["tabs"][1]["weights"][1, 0]).max() <= 5e-5  # the tab's layer 2, head 1
    page = open_page(tmp_path / "att" / "decoder_self_attention_0_lecture.html", width=1300)
    page.click("#tokens button[data-i='1']")
    assert f"{t - 2} of the {t} keys are masked for q^2" in page.eval("document.getElementById('masked-note')"
                                                                       ".textContent")
    assert "a later key is a token not written yet" in page.eval("document.getElementById('notes').textContent")


def test_tabs_of_a_nat_run_and_a_marian_folder(tmp_path, open_page):
    nat = nat_run(tmp_path)
    tr = attnkit.load_pretrained(nat)  # what `translate --attention` calls (its PNGs left out: matplotlib is slow)
    path, al = decoder_page(tr, TEXT, tmp_path / "att" / "attention_0.html", iterations=2)
    assert al.translation == tr.translate([TEXT], iterations=2)[0]
    d = check_page(path, tr, TEXT, nat=True, iterations=2)
    page = open_page(path)
    assert page.eval("document.querySelectorAll('#matrix td.masked').length") == 0
    assert "not masked" in page.eval("document.getElementById('tab-note').textContent")
    assert page.eval("document.querySelectorAll('#thumbs canvas').length") == 2 * 2  # 2 decoder layers x 2 heads
    assert d["tabs"][1]["queries"] == d["tabs"][2]["queries"]  # a NAT decoder reads its own tokens

    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    from tests.pretrained.marian_folders import hf_marian, marian_folder

    folder = marian_folder(tmp_path / "m", hf_marian(vocab=30, d=16, enc=1, dec=1, heads=2, ffn=32, seed=5,
                                                              eos_bias=-5.0))  # END late: several steps
    tr = attnkit.load_pretrained(folder)
    path, _ = decoder_page(tr, "ein mann", tmp_path / "m-att" / "attention_0.html", num_beams=1,
                           max_new_tokens=6)
    d = check_page(path, tr, "ein mann", num_beams=1, max_new_tokens=6)
    assert d["tabs"][1]["queries"][0].startswith("<pad>\u2192")  # Marian's decoder starts from the pad token
    page = open_page(path)
    t = len(d["tabs"][1]["queries"])
    assert page.eval("document.querySelectorAll('#matrix td.masked').length") == t * (t - 1) // 2


@pytest.mark.parametrize("positional", ["alibi", "rope"])
def test_positions_inside_attention_keep_the_models_own_weights(positional):
    """RoPE rotates q and k (attnkit.explain on the rotated ones); ALiBi adds a bias to the scores, so its weights
    come from the module's own need_weights call: either way the tabs hold the model's weights, and the decoder's
    self-attention mask is the causal one."""
    from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel
    from attnkit.nn import TransformerConfig
    from attnkit.viz.decoder import decoder_attention

    torch.manual_seed(0)
    tc = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, num_decoder_layers=2, dropout=0.0,
                           positional=positional)
    model = Seq2SeqModel(Seq2SeqConfig(20, 20, tc)).eval()
    ids, rows = torch.tensor([[5, 6, 7, 8, 2]]), torch.tensor([[1, 9, 10, 11]])
    att = decoder_attention(model, lambda: model(ids, None, rows))
    for got, want in zip((att.encoder, att.decoder, att.cross), own_weights(model, ids, None, rows)):
        assert np.abs(got.numpy() - want).max() <= 1e-5
    assert torch.equal(att.decoder_mask, torch.ones(4, 4).tril().bool())
