"""`attnkit export RUN --format marian DIR`: Hugging Face loads the folder, CTranslate2's converter accepts it, and
attnkit (the run), Hugging Face, CTranslate2 and attnkit (the folder) give the same greedy translations."""

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnkit.cli.main import main  # noqa: E402
from attnkit.load import load_pretrained  # noqa: E402
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel  # noqa: E402
from attnkit.nn import TransformerConfig  # noqa: E402
from attnkit.pretrained.marian.export import export_marian  # noqa: E402

from .translation_run import make_run, texts  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

VARIANTS = {  # the run's layout: interleaved positions need the residual permutation; untied tables
    "relu-interleaved-shared": dict(activation="relu", sinusoidal_layout="interleaved", share=True, seed=0),
    "silu-halves-separate": dict(activation="silu", sinusoidal_layout="halves", share=False, seed=1),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def exported(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    (root / "run").mkdir()
    run = make_run(root / "run", **VARIANTS[request.param])
    assert main(["export", str(run), str(root / "marian"), "--format", "marian"]) == 0
    return load_pretrained(run), root / "marian"


def test_hugging_face_loads_the_folder_and_translates_the_same(exported):
    ours, folder = exported
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "marian" and cfg["pad_token_id"] == cfg["vocab_size"] - 1
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    src = [s for s, _ in texts()]
    want = ours.translate(src, max_new_tokens=20)
    assert len(set(want)) > 2 and len({len(w) for w in want}) > 2  # translations and lengths differ
    batch = tok(src, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = hf.generate(**batch, max_new_tokens=20, num_beams=1, do_sample=False)
    assert tok.batch_decode(out, skip_special_tokens=True) == want


def test_ctranslate2_converts_the_folder_and_translates_the_same(exported, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    ours, folder = exported
    ctranslate2.converters.TransformersConverter(str(folder)).convert(str(tmp_path / "ct2"))
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    src = [s for s, _ in texts()]
    engine = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    res = engine.translate_batch([tok.convert_ids_to_tokens(tok(s).input_ids) for s in src], beam_size=1,
                                 max_decoding_length=20, min_decoding_length=0,  # CTranslate2's default is 1
                                 suppress_sequences=[["<s>"]], disable_unk=True)
    got = [tok.convert_tokens_to_string(r.hypotheses[0]) for r in res]
    assert got == ours.translate(src, max_new_tokens=20)


def test_attnkit_loads_the_folder_back(exported):
    ours, folder = exported
    back = load_pretrained(folder)
    src = [s for s, _ in texts()]
    assert back.translate(src, max_new_tokens=20, num_beams=1) == ours.translate(src, max_new_tokens=20)
    assert back.translate(src[:6], max_new_tokens=20, num_beams=3) == ours.translate(src[:6], max_new_tokens=20,
                                                                                     num_beams=3)


def test_pre_ln_runs_cannot_be_written_as_marian(tmp_path):
    cfg = Seq2SeqConfig(20, 20, TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1,
                                                  num_decoder_layers=1, norm_first=True))
    with pytest.raises(ValueError, match="pre-LN.*post-LN"):
        export_marian(Seq2SeqModel(cfg), None, tmp_path / "x")
    assert not (tmp_path / "x").exists()
