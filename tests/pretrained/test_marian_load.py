"""Marian folders: the files read (pytorch_model.bin without pickle code, positions, sharing) and bad input, each a
one-line error naming the file."""

import json
import pickle

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import attnkit  # noqa: E402
from attnkit.pretrained.marian import MarianTranslator  # noqa: E402
from tests.pretrained.marian_folders import hf_marian, marian_folder, padded_batch  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def hf():
    return hf_marian(vocab=30, d=16, enc=1, dec=1, heads=2, ffn=32, seed=5)


@pytest.fixture
def folder(hf, tmp_path):
    return marian_folder(tmp_path / "m", hf)


def edit_config(folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


def one_line(excinfo, *names):
    msg = str(excinfo.value)
    assert "\n" not in msg
    for n in names:
        assert n in msg, msg
    return msg


def test_pytorch_model_bin_is_read_without_pickle_code(hf, folder):
    from safetensors.torch import load_file

    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    tr = attnkit.load_pretrained(folder)
    assert isinstance(tr, MarianTranslator)
    ids, mask = padded_batch(30, 29)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.full((4, 1), 29)).logits
    torch.testing.assert_close(tr.model(ids, mask, torch.full((4, 1), 29)), ref, atol=2e-5, rtol=1e-4)


class Boom:
    def __reduce__(self):
        return (print, ("pickle code ran",))


def test_pickle_with_code_is_refused(folder):
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"x": Boom()}))
    with pytest.raises(ValueError) as e:
        attnkit.load_pretrained(folder)
    one_line(e, "pytorch_model.bin")


@pytest.mark.parametrize("missing", ["tokenizer.json", "vocab.json", "source.spm"])
def test_missing_tokenizer_file_names_it(tmp_path, hf, missing):
    folder = marian_folder(tmp_path / "m", hf, tokenizer="json" if missing == "tokenizer.json" else "spm")
    (folder / missing).unlink()
    with pytest.raises(FileNotFoundError) as e:
        attnkit.load_pretrained(folder)
    one_line(e, "vocab.json" if missing == "tokenizer.json" else missing)


def test_other_model_type_is_an_unknown_architecture(folder):
    edit_config(folder, model_type="bart", architectures=["BartForConditionalGeneration"])
    with pytest.raises((ValueError, FileNotFoundError)) as e:
        attnkit.load_pretrained(folder)
    one_line(e, "config.json", "bart")


@pytest.mark.parametrize("changes,words", [
    # configs of architectures attnkit does not run
    (dict(architectures=["MarianForCausalLM"]), ["config.json", "unsupported architecture", "MarianForCausalLM"]),
    (dict(normalize_before=True), ["config.json", "normalize_before"]),
    (dict(activation_function="tanh"), ["config.json", "activation_function 'tanh'"]),
    (dict(decoder_ffn_dim=64), ["config.json", "decoder_ffn_dim"]),
    # checkpoints whose shapes do not fit the config
    (dict(encoder_ffn_dim=48, decoder_ffn_dim=48), ["model.safetensors", "fc1.weight", "(32, 16)", "(48, 16)"]),
    (dict(vocab_size=31, decoder_vocab_size=31), ["model.safetensors", "encoder embedding", "(30, 16)"]),
    (dict(encoder_layers=2), ["config.json", "`encoder_layers` is 2", "model.safetensors holds 1 encoder layers"]),
    (dict(decoder_layers=0, encoder_layers=1), ["config.json"]),
])
def test_unsupported_configs_and_shapes_that_do_not_fit_name_the_file(folder, changes, words):
    edit_config(folder, **changes)
    with pytest.raises(ValueError) as e:
        attnkit.load_pretrained(folder)
    one_line(e, *words)


def test_modified_positions_are_refused(folder):
    from safetensors.torch import load_file, save_file

    state = load_file(folder / "model.safetensors")
    from attnkit.functional.positional import sinusoidal_table

    table = sinusoidal_table(64, 16, layout="halves")
    table[3] += 1.0
    state["model.encoder.embed_positions.weight"] = table
    save_file(state, folder / "model.safetensors")
    with pytest.raises(ValueError) as e:
        attnkit.load_pretrained(folder)
    one_line(e, "model.safetensors", "embed_positions", "rows [3]")


def test_translate_command_reads_a_marian_folder(folder, capsys):
    from attnkit.cli.main import main

    texts = ["ein mann fährt fahrrad .", "zwei hunde"]
    assert main(["translate", str(folder), *texts, "--max-new-tokens", "6"]) == 0
    want = attnkit.load_pretrained(folder).translate(texts, num_beams=1, max_new_tokens=6)
    assert capsys.readouterr().out.splitlines() == want
    # the cross-attention of an opus-mt folder: the PNG per layer, the page and the lecture page
    tr = attnkit.load_pretrained(folder)
    al = tr.attend("ein mann", num_beams=1, max_new_tokens=6)
    assert al.translation == tr.translate(["ein mann"], num_beams=1, max_new_tokens=6)[0]
    assert al.source == [tr.tokenizer.piece(i) for i in tr.source_ids("ein mann")]
    assert al.weights.shape == (1, 2, len(al.target), len(al.source))  # 1 decoder layer, 2 heads
    torch.testing.assert_close(al.weights.sum(-1), torch.ones(al.weights.shape[:-1]))
    maps = folder / "maps"
    assert main(["translate", str(folder), "ein mann", "--attention", str(maps), "--max-new-tokens", "6"]) == 0
    assert sorted(p.name for p in maps.iterdir()) == ["attention_0.html", "cross_attention_0.html",
                                                      "cross_attention_0_layer1.png", "cross_attention_0_lecture.html",
                                                      "decoder_self_attention_0_lecture.html"]
    from attnkit.viz import read_attention_html

    page = read_attention_html(maps / "cross_attention_0.html")
    assert page["keys"] == al.source and page["queries"] == al.target


def test_a_marian_folder_in_int8(folder):
    fp, q = attnkit.load_pretrained(folder), attnkit.load_pretrained(folder, dtype="int8")
    assert type(q.decoder.layers[0]).__name__ == "QuantLayer" and next(q.model.parameters()).dtype == torch.float32
    ids, mask = padded_batch(30, fp.config.pad_token_id)
    with torch.no_grad():
        a, b = fp.decoder.encode(ids, mask), q.decoder.encode(ids, mask)
    assert torch.nn.functional.cosine_similarity(a, b, dim=-1)[mask.bool()].min() >= 0.99
    assert not torch.equal(a, b)  # int8 did run
    with pytest.raises(ValueError, match="^load_marian: dtype='int8' runs on the inference engine only; not with "
                                         "fast=False$"):
        attnkit.pretrained.marian.load_marian(folder, dtype="int8", fast=False)
