"""What a run folder's files may say (issue 43, items 5, 7 and 9): every size in meta.json is checked against the
weights before a model is built, auxiliary files are read by name from the run only, and every bad file is one
line naming it, quickly (a model of the sizes tried here would take GBs and minutes)."""

import json
import shutil
import time

import pytest

import attnkit
from attnkit.cli.main import main
from attnkit.train import checkpoint as ck

from ..tasks.corpus import write_corpus
from .file_fuzz import fuzz, problems

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--d-model", "16", "--num-heads", "2", "--d-ff", "32", "--num-encoder-layers", "1", "--no-progress",
        "--threads", "1"]
TRANSLATE = ["--vocab-size", "60", "--num-decoder-layers", "1", "--batch-tokens", "400", "--max-minutes", "0",
             "--no-bf16", "--max-steps", "2", "--eval-every", "2", "--average", "0", "--max-length", "32"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A translation run of two steps (its translations do not matter, only its files)."""
    root = tmp_path_factory.mktemp("reads")
    paths = write_corpus(root / "data", n_train=60, n_dev=6)
    out = root / "run"
    assert main(["train", "translate", *[f"--{k.replace('_', '-')}={v}" for k, v in paths.items()], *TINY, *TRANSLATE,
                 "--out", str(out)]) == 0
    assert (out / "best.json").exists()
    return out


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("classifier")
    rows = [f"{'great' if i % 2 else 'dull'} film {i % 5}\t{i % 2}" for i in range(40)]
    (root / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = root / "run"
    assert main(["train", "classifier", "--train", str(root / "train.tsv"), "--out", str(out), "--epochs", "1",
                 "--batch-size", "16", *TINY]) == 0
    return out


def copy(run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(run, out)
    return out, ck.resolve(out, "best")


def edit_meta(folder, edit):
    meta = json.loads((folder / "meta.json").read_text())
    edit(meta)
    (folder / "meta.json").write_text(json.dumps(meta))


def one_line(call, *words, kinds=(ValueError,), seconds=10.0):
    """The error ``call()`` raises: one of ``kinds``, one line holding ``words``, raised within ``seconds``."""
    start = time.perf_counter()
    with pytest.raises(kinds) as e:
        call()
    took = time.perf_counter() - start
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg
    assert took < seconds, f"{took:.1f} s: {msg}"
    return msg


def setter(*keys, value):
    def edit(meta):
        d = meta
        for k in keys[:-1]:
            d = d[k]
        if value is KeyError:
            del d[keys[-1]]
        else:
            d[keys[-1]] = value
    return edit


# sizes that would take 2.7 GB and 71 s (1e7 words), 8-256 GB (1e9, d_model 1e5, max_len 1e9), 125 s (1e4 layers)
@pytest.mark.parametrize("keys,value,words", [
    (("model", "src_vocab_size"), 10**7, ["`model.src_vocab_size` is 10000000"]),
    (("model", "tgt_vocab_size"), 10**9, ["`model.tgt_vocab_size` is 1000000000"]),
    (("model", "transformer", "d_ff"), 4096, ["does not fit", "ff.linear1.weight (4096, 16) in meta.json"]),
    (("model", "transformer", "d_model"), 10**5, ["d_model"]),
    (("model", "transformer", "d_model"), 32, ["does not fit"]),
    (("model", "transformer", "max_len"), 10**9, ["max_len"]),
    (("model", "transformer", "max_len"), 10**6, ["tables of its own", "more than the"]),
    (("model", "transformer", "num_encoder_layers"), 10**4, ["num_encoder_layers"]),
    (("model", "transformer", "num_encoder_layers"), 1000, ["`model.transformer.num_encoder_layers` is 1000, but",
                                                            "holds only"]),
    (("model", "transformer", "num_encoder_layers"), 2, ["does not fit", "missing ['encoder.layers.1."]),
    (("model", "transformer", "num_heads"), "x", ["invalid `model`", "num_heads"]),
    (("model",), [], ["`model` must be a JSON object"]),
])
def test_meta_sizes_are_checked_against_the_weights_first(run, tmp_path, keys, value, words):
    out, folder = copy(run, tmp_path)
    edit_meta(folder, setter(*keys, value=value))
    one_line(lambda: attnkit.load_pretrained(out), str(folder / "meta.json"), *words, kinds=ck.CheckpointError)


def test_subwords_are_read_by_name_from_the_run_only(run, tmp_path):
    out, folder = copy(run, tmp_path)
    # a path in meta.json, with its checksum removed: /dev/zero was read until memory ran out
    edit_meta(folder, lambda m: (m.update(subwords="/dev/zero"), m.pop("subwords_sha256")))
    one_line(lambda: attnkit.load_pretrained(out), "meta.json", "`subwords` must be 'bpe.json'", "/dev/zero",
             kinds=ck.CheckpointError)
    edit_meta(folder, lambda m: m.update(subwords="bpe.json"))
    one_line(lambda: attnkit.load_pretrained(out), "meta.json", "`subwords_sha256` must be the sha256 of bpe.json",
             kinds=ck.CheckpointError)
    edit_meta(folder, lambda m: m.update(subwords_sha256="0" * 64))
    one_line(lambda: attnkit.load_pretrained(out), "bpe.json is not the vocabulary", kinds=ck.CheckpointError)


def test_bpe_json_that_is_a_folder_or_a_device(run, tmp_path):
    out, _ = copy(run, tmp_path)
    (out / "bpe.json").unlink()
    (out / "bpe.json").mkdir()
    one_line(lambda: attnkit.load_pretrained(out), f"{out / 'bpe.json'}: expected a file, got a folder")
    (out / "bpe.json").rmdir()
    (out / "bpe.json").symlink_to("/dev/zero")
    one_line(lambda: attnkit.load_pretrained(out), f"{out / 'bpe.json'}: expected a file, got a device")


def test_vocabulary_ids_past_the_model_are_refused(run, tmp_path):
    out, folder = copy(run, tmp_path)
    doc = json.loads((out / "bpe.json").read_text())
    doc["model"]["vocab"]["zzz"] = 10**6
    (out / "bpe.json").write_text(json.dumps(doc))
    edit_meta(folder, lambda m: m.update(subwords_sha256=ck.sha256(out / "bpe.json")))
    one_line(lambda: attnkit.load_pretrained(out), "bpe.json", "has ids up to 1000000, its model's tables",
             kinds=ck.CheckpointError)


@pytest.mark.parametrize("key,value,words", [
    ("decoder", "x", ["`decoder` must be 'ar' or 'nat', got 'x'"]),  # it ran as autoregressive
    ("max_length", "x", ["`max_length` must be an integer in [2, 32]"]),  # named no file
    ("max_length", 10**9, ["`max_length` must be an integer in [2, 32]"]),
    ("src_lang", 5, ["`src_lang` must be a string"]),
])
def test_translation_entries_of_meta_json(run, tmp_path, capsys, key, value, words):
    out, folder = copy(run, tmp_path)
    edit_meta(folder, setter(key, value=value))
    one_line(lambda: attnkit.load_pretrained(out), str(folder / "meta.json"), *words, kinds=ck.CheckpointError)
    assert main(["translate", str(out), "Ein mann."]) == 1  # the command line: the same line, no traceback
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnkit: error:") and words[0] in err[0], err


DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize("name", ["meta.json", "best.json", "latest.json", "trainer.json"])
def test_json_nested_200000_deep_is_one_line(run, tmp_path, name):
    out, folder = copy(run, tmp_path)
    path = (folder if name in ("meta.json", "trainer.json") else out) / name
    path.write_text(DEEP)
    if name == "trainer.json":  # read only by --resume, after its checksum: the checksum is the error
        edit_meta(folder, lambda m: m["files"].update({"trainer.json": ck.sha256(path)}))
        one_line(lambda: ck.load_trainer_state(folder), str(path), "nested 200000 deep", kinds=ck.CheckpointError)
        return
    which = "latest" if name == "latest.json" else "best"
    one_line(lambda: attnkit.load_pretrained(out, which=which), str(path), "nested 200000 deep",
             kinds=ck.CheckpointError)


@pytest.mark.parametrize("doc,words", [
    ({"path": 5}, ['"path" must name a checkpoint folder', "got 5"]),
    ({"path": "/etc"}, ["got '/etc'"]),
    ({"path": "../run"}, ["got '../run'"]),
    ([], ["got None"]),
])
def test_best_json_that_names_no_checkpoint_folder(run, tmp_path, doc, words):
    out, _ = copy(run, tmp_path)
    (out / "best.json").write_text(json.dumps(doc))
    one_line(lambda: attnkit.load_pretrained(out), str(out / "best.json"), *words, kinds=ck.CheckpointError)


def test_classifier_words_and_labels_must_fit_the_model(classifier_run, tmp_path, capsys):
    out, folder = copy(classifier_run, tmp_path)
    meta = folder / "meta.json"
    words = json.loads(meta.read_text())["words"]
    # ten million extra words: refused by meta.json's size, before it is parsed
    text = meta.read_text()
    meta.write_text(text.replace('"words": [', '"words": [' + '"x", ' * 10**7, 1))
    one_line(lambda: ck.load_meta(out, which="best"), str(meta), "bytes", kinds=ck.CheckpointError, seconds=5)
    # a few extra words: their ids would be past the embedding table (an IndexError at predict time)
    meta.write_text(text.replace('"words": [', '"words": [' + '"zz1", "zz2", ', 1))
    assert main(["predict", str(out), "zz1 film"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(meta) in err and f"`words` has {len(words) + 2} entries, but the model's " \
        f"weights have {len(words)}" in err, err
    meta.write_text(text.replace('"labels": [', '"labels": ["2", ', 1))
    assert main(["predict", str(out), "great film"]) == 1
    assert "`labels` has 3 entries, but the model's weights have 2" in capsys.readouterr().err


def test_a_folder_with_another_config_json_says_what_it_is(tmp_path, capsys):
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    assert main(["translate", str(folder), "Ein mann."]) == 1
    err = capsys.readouterr().err
    assert "config.json is not a Marian model's (model_type 'bert'" in err and "no checkpoint in" not in err
    (folder / "config.json").write_text(json.dumps({"model_type": "marian"}))
    assert main(["evaluate", str(folder)]) == 1  # evaluate reads runs only
    assert "is a Marian model folder, not an attnkit run" in capsys.readouterr().err
    (folder / "config.json").write_text("{")
    assert main(["translate", str(folder), "Ein mann."]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{folder / 'config.json'}: not valid JSON" in err, err


def test_fuzz_of_the_files_a_run_folder_holds(run):
    """Every value of meta.json, latest.json and best.json, and of a spread of bpe.json and of the weights' header,
    replaced by sizes, NaN, inf, negative and huge numbers, other types, nesting (and each JSON file by broken or
    other JSON): loading and translating is fine or one ValueError line, each within seconds and never more than
    2 GB of memory (the child's address space is capped)."""
    ckpt = ck.resolve(run, "best").name
    results = fuzz(run, "Ein mann.", [f"{ckpt}/meta.json:0:2", "latest.json:0:2", "best.json:0:2", "bpe.json:30:1",
                                      f"{ckpt}/model.safetensors:40:1"])
    assert len(results) > 200 and not problems(results), "\n".join(problems(results))
    refused = {r["file"] for r in results if r["kind"] != "ok"}
    assert refused == {f"{ckpt}/meta.json", "latest.json", "best.json", "bpe.json", f"{ckpt}/model.safetensors"}


def rewrite_weights(folder, change):
    """The checkpoint's model.safetensors with ``change(state)`` applied, its sha256 in meta.json updated to match."""
    from safetensors.torch import load_file, save_file

    path = folder / ck.WEIGHTS
    state = load_file(str(path))
    change(state)
    save_file(state, str(path))
    edit_meta(folder, setter("files", ck.WEIGHTS, value=ck.sha256(path)))
    return state


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_weights_are_refused_on_load_with_the_tensor_s_name(run, tmp_path, capsys, value):
    """Issue 65, item 3: NaN / inf weights with a matching checksum printed an empty translation with exit 0."""
    out, best = copy(run, tmp_path)
    name = "encoder.layers.0.ff.linear1.weight"
    rewrite_weights(best, lambda state: state[name].view(-1)[5:7].fill_(value))
    one_line(lambda: attnkit.load_pretrained(out), f"tensor {name} holds NaN or infinite values")
    assert main(["translate", str(out), "ein hund"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"attnkit: error: checkpoint: weights in {best}: tensor {name} holds NaN or infinite values (attnkit never "
        "saves such weights: the file was changed or made elsewhere)\n")


def test_int8_tensors_in_a_float_run_are_refused(run, tmp_path):
    import torch

    out, best = copy(run, tmp_path)
    name = "encoder.layers.0.ff.linear1.weight"

    def to_int8(state):
        state[name] = state[name].clamp(-1, 1).mul(100).to(torch.int8)
    rewrite_weights(best, to_int8)
    one_line(lambda: attnkit.load_pretrained(out), "holds tensors of another kind than the model's", f"{name} (I8)")
