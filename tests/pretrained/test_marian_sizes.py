"""Sizes a Marian folder's config.json and generation_config.json give (issue 43, items 4, 7 and 9): each checked
against the weights' own tensor list or a bound before anything is allocated, one line naming the file and key."""

import io
import json
import pickle
import time
import warnings

import pytest
import torch

pytest.importorskip("transformers")

import attnkit  # noqa: E402
from attnkit.cli.main import main  # noqa: E402
from attnkit.pretrained.marian.translator import TranslationWarning  # noqa: E402
from tests.pretrained.marian_folders import hf_marian, marian_folder  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def hf():
    return hf_marian(vocab=30, d=16, enc=1, dec=1, heads=2, ffn=32, seed=5)


@pytest.fixture
def folder(hf, tmp_path):
    return marian_folder(tmp_path / "m", hf)


def edit(path, **changes):
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc.update(changes)
    path.write_text(json.dumps(doc))


def one_line(folder, *words, seconds=10.0):
    start = time.perf_counter()
    with pytest.raises(ValueError) as e:
        attnkit.load_pretrained(folder)
    took = time.perf_counter() - start
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg
    assert took < seconds, f"{took:.1f} s: {msg}"
    return msg


# max_position_embeddings 1e9 tried 8 GB, 3e7 allocated 2.3 GB, encoder_layers 1e6 took 20 s and 3 GB
@pytest.mark.parametrize("changes,words", [
    (dict(max_position_embeddings=10**9), ["config.json", "max_len"]),
    (dict(max_position_embeddings=3 * 10**5), ["config.json", "`max_position_embeddings` is 300000", "at most 16384"]),
    (dict(encoder_layers=10**6), ["config.json", "num_encoder_layers"]),
    (dict(decoder_layers=900), ["config.json", "`decoder_layers` is 900", "holds 1 decoder layers"]),
    (dict(vocab_size=10**9, decoder_vocab_size=10**9), ["model.safetensors", "(1000000000, 16)"]),
    (dict(d_model=4096), ["model.safetensors", "do not fit config.json"]),
    (dict(encoder_ffn_dim=2**20, decoder_ffn_dim=2**20), ["model.safetensors", "fc1.weight", "(1048576, 16)"]),
    (dict(encoder_attention_heads=3, decoder_attention_heads=3), ["config.json", "divisible"]),
    (dict(activation_function=[]), ["config.json", "activation_function []"]),
    (dict(vocab_size="30"), ["config.json", "`vocab_size` must be a positive integer"]),
])
def test_config_sizes_are_checked_before_anything_is_allocated(folder, changes, words):
    edit(folder / "config.json", **changes)
    one_line(folder, *words)


@pytest.mark.parametrize("changes,words", [
    (dict(max_length=10**9), ["`max_length` must be an integer in [1, 64], got 1000000000"]),
    (dict(max_length="x"), ["`max_length`"]),
    (dict(num_beams=10**6), ["`num_beams` must be an integer in [1, 256], got 1000000"]),
    (dict(num_beams=float("nan")), ["`num_beams`", "nan"]),
    (dict(bad_words_ids=[[10**9]]), ["`bad_words_ids` must be a list of lists of token ids in [0, 30)"]),
    (dict(bad_words_ids=[[-3]]), ["`bad_words_ids`", "[[-3]]"]),  # suppressed id 17 (-3 from the end)
    (dict(bad_words_ids=5), ["`bad_words_ids`", "got 5"]),
    (dict(bad_words_ids=[[1e9]]), ["`bad_words_ids`"]),
])
def test_generation_config_values_name_the_file_and_key(folder, changes, words):
    edit(folder / "generation_config.json", **changes)
    one_line(folder, str(folder / "generation_config.json"), *words)


def test_generation_values_read_from_config_json_name_it(folder):
    (folder / "generation_config.json").unlink()
    edit(folder / "config.json", num_beams=0)
    one_line(folder, str(folder / "config.json"), "`num_beams` must be an integer in [1, 256], got 0")


def test_valid_generation_values_are_the_defaults(folder):
    edit(folder / "generation_config.json", max_length=9, num_beams=3, bad_words_ids=[[29], [4, 5]])
    tr = attnkit.load_pretrained(folder)
    assert tr.defaults == {"num_beams": 3, "max_new_tokens": 8, "suppress_tokens": [29],  # [4, 5]: not one token
                           "forced_eos_token_id": 0}  # Hugging Face's folder has END forced at the last step



@pytest.mark.parametrize("value, words", [(float("nan"), "got nan"), ("x", "got 'x'"), (1e9, "got 1000000000.0")])
def test_length_penalty_is_checked(folder, value, words):
    edit(folder / "generation_config.json", length_penalty=value)
    one_line(folder, str(folder / "generation_config.json"), "`length_penalty` must be a number in [-100, 100]", words)


def test_length_penalty_is_honoured_as_hugging_face_does(folder, hf):
    """Issue 65, item 3: it was ignored. Beam search ranks finished hypotheses by log p / length ** penalty."""
    edit(folder / "generation_config.json", length_penalty=-2.0, num_beams=3)
    tr = attnkit.load_pretrained(folder, fast=False)
    assert tr.defaults["length_penalty"] == -2.0
    ids = torch.tensor([[5, 9, 12, 7, 3, 0]])
    ours = tr.generate(ids, torch.ones_like(ids), max_new_tokens=8)
    with torch.no_grad():
        ref = hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), num_beams=3, length_penalty=-2.0,
                          max_new_tokens=8, do_sample=False, forced_eos_token_id=None, early_stopping=False)
    assert ours.sequences[0, :ref.shape[1]].tolist() == ref[0].tolist()


def test_generation_settings_attnkit_does_not_use_are_named_in_a_warning(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        attnkit.load_pretrained(folder)  # Hugging Face's own file: every key read, no warning
    edit(folder / "generation_config.json", no_repeat_ngram_size=3, top_k=50, flavour="x", renormalize_logits=True)
    with pytest.warns(TranslationWarning) as caught:
        tr = attnkit.load_pretrained(folder)
    (msg,) = [str(w.message) for w in caught]
    assert msg == (f"{folder / 'generation_config.json'}: attnkit does not use `flavour`, `no_repeat_ngram_size`; "
                   "translations may differ from Hugging Face's")  # top_k 50: the default
    assert tr.defaults["renormalize_logits"] is True


def test_a_nan_in_the_weights_or_the_position_table_is_refused(folder):
    from safetensors.torch import load_file, save_file

    state = load_file(str(folder / "model.safetensors"))
    names = [n for n in ("model.encoder.embed_positions.weight", "model.encoder.layers.0.fc1.weight") if n in state]
    assert "model.encoder.layers.0.fc1.weight" in names
    for name in names:
        bad = {k: v.clone() for k, v in state.items()}
        bad[name].view(-1)[3] = float("nan")
        save_file(bad, str(folder / "model.safetensors"))
        one_line(folder, str(folder / "model.safetensors"), f"tensor {name} holds NaN or infinite values")


@pytest.mark.parametrize("name", ["config.json", "generation_config.json"])
def test_json_nested_200000_deep_is_one_line(folder, name):
    (folder / name).write_text("[" * 200_000 + "]" * 200_000)
    one_line(folder, str(folder / name), "nested 200000 deep")


class Boom:
    def __reduce__(self):
        return (print, ("pickle code ran",))


@pytest.mark.parametrize("torch_format", [False, True])
def test_pickled_bin_is_refused_before_torch_reads_it(folder, capfd, torch_format):
    (folder / "model.safetensors").unlink()
    buf = io.BytesIO()
    if torch_format:
        torch.save({"w": torch.zeros(2), "x": Boom()}, buf)
    else:
        pickle.dump({"x": Boom()}, buf)
    (folder / "pytorch_model.bin").write_bytes(buf.getvalue())
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        one_line(folder, "pytorch_model.bin", "refused", "print")
    out, err = capfd.readouterr()
    assert not caught and out == "" and err == "", (caught, err)  # no torch warning, and the code never ran


def test_translate_command_says_what_is_wrong_with_config_json(folder, capsys):
    (folder / "config.json").write_text("{")
    assert main(["translate", str(folder), "ein mann"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{folder / 'config.json'}: not valid JSON" in err, err
    (folder / "config.json").write_text(json.dumps({"model_type": "t5"}))
    assert main(["translate", str(folder), "ein mann"]) == 1
    err = capsys.readouterr().err.strip()
    assert "not a Marian model's (model_type 't5'" in err and "no checkpoint in" not in err, err


def test_fuzz_of_the_files_a_marian_folder_holds(hf, tmp_path):
    """Every value of config.json and generation_config.json, and of a spread of tokenizer.json and of the weights'
    header, replaced by sizes, NaN, inf, negative and huge numbers, other types, nesting (and each JSON file by
    broken or other JSON): loading and translating is fine or one ValueError line, each within seconds and never
    more than 2 GB of memory (the child's address space is capped)."""
    from tests.train.file_fuzz import fuzz, problems

    folder = marian_folder(tmp_path / "m", hf)
    results = fuzz(folder, "ein mann", ["config.json:0:2", "generation_config.json:0:2", "tokenizer.json:30:1",
                                        "model.safetensors:30:1"])
    assert len(results) > 150 and not problems(results), "\n".join(problems(results))
    refused = {r["file"] for r in results if r["kind"] != "ok"}
    assert refused == {"config.json", "generation_config.json", "tokenizer.json", "model.safetensors"}, refused
