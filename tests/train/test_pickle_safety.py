"""Nothing attnkit reads runs code: a pickle planted in any file of a run folder or of a pretrained
model folder is never executed by --resume, evaluate, predict or load_pretrained. Each planted
payload would write a marker file if it ran."""

import io
import pickle
import shutil

import pytest
import torch

from attnkit.cli.main import main

TINY = ["--d-model", "16", "--num-heads", "2", "--d-ff", "32", "--num-encoder-layers", "1", "--no-progress",
        "--threads", "1"]
RUN = ["train", "image", "--dataset", "digits", "--max-steps", "2", "--eval-every", "2", "--batch-size", "16", *TINY]


class Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):  # unpickling calls exec(...), which writes the marker
        return exec, (f"open({self.marker!r}, 'w').write('code ran')",)


def evil_bytes(marker, torch_format: bool) -> bytes:
    """A raw pickle, or torch.save's zip format (what trainer.pt and pytorch_model.bin are)."""
    obj = {"state": Payload(marker), "weight": torch.zeros(2)}
    if not torch_format:
        return pickle.dumps(obj)
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("safety") / "run"
    assert main([*RUN, "--out", str(out)]) == 0
    return out


def _files(folder):
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())


def _planted(run_folder, tmp_path, name):
    out = tmp_path / "run"
    shutil.copytree(run_folder, out)
    ckpt = next(out.glob("ckpt-*"))
    target = out / name if not name.startswith("ckpt/") else ckpt / name[5:]
    torch_format = target.suffix in (".pt", ".bin")
    target.write_bytes(evil_bytes(tmp_path / "marker", torch_format))
    return out


# every file the run writes, plus the pickles an older attnkit or a model hub would hold
NAMES = ["latest.json", "best.json", "metrics.jsonl", "curves.png", "result.json", "ckpt/meta.json",
         "ckpt/model.safetensors", "ckpt/trainer.json", "ckpt/trainer.safetensors", "ckpt/trainer.pt",
         "ckpt/pytorch_model.bin"]


def test_names_cover_every_file_of_a_run(run_folder):
    written = {str(p).replace(next(run_folder.glob("ckpt-*")).name, "ckpt") for p in _files(run_folder)}
    assert written <= set(NAMES), written - set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_planted_pickle_in_a_run_folder_never_runs(run_folder, tmp_path, name, capsys):
    out = _planted(run_folder, tmp_path, name)
    commands = {"resume": [*RUN, "--out", str(out), "--resume"],
                "evaluate": ["evaluate", str(out), "--data", "test"],
                "predict": ["predict", str(out), "test:0"]}
    for what, argv in commands.items():
        rc = main(argv)
        err = capsys.readouterr().err
        assert not (tmp_path / "marker").exists(), f"{what} ran the pickle planted in {name}"
        if rc != 0:  # refused: one line naming the file
            lines = [line for line in err.splitlines() if line.strip()]
            assert rc == 1 and len(lines) == 1 and lines[0].startswith("attnkit: error:"), (what, err)
            assert name.rsplit("/", 1)[-1] in lines[0], (what, lines[0])


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    from tests.pretrained.test_loader import make_folder

    return make_folder(tmp_path_factory.mktemp("pretrained") / "m")


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "model.safetensors", "modules.json",
                                  "1_Pooling/config.json", "sentence_bert_config.json", "pytorch_model.bin",
                                  "only:pytorch_model.bin"])
def test_planted_pickle_in_a_pretrained_folder_never_runs(model_folder, tmp_path, name):
    from attnkit.pretrained import load_pretrained

    folder = tmp_path / "m"
    shutil.copytree(model_folder, folder)
    if name.startswith("only:"):  # no safetensors: the loader must read the .bin, with weights_only=True
        name = name[5:]
        (folder / "model.safetensors").unlink()
    target = folder / name
    target.write_bytes(evil_bytes(tmp_path / "marker", target.suffix == ".bin"))
    try:
        load_pretrained(folder)
    except ValueError as e:
        assert name.rsplit("/", 1)[-1] in str(e) or "tokenizer" in str(e), e
    assert not (tmp_path / "marker").exists()


def test_the_payload_does_run_when_unpickled_unsafely(tmp_path):
    """The check above can fail: the same bytes do write the marker under a plain unpickler."""
    pickle.loads(evil_bytes(tmp_path / "marker", torch_format=False))
    assert (tmp_path / "marker").read_text() == "code ran"
    (tmp_path / "marker").unlink()
    torch.load(io.BytesIO(evil_bytes(tmp_path / "marker", torch_format=True)), weights_only=False)
    assert (tmp_path / "marker").exists()
