"""Each task offers exactly the encoder options its model reads: changing any offered one changes the model."""

from __future__ import annotations

import pytest

from attnkit.cli.main import build_parser
from attnkit.nn import TransformerConfig
from attnkit.tasks import TASKS, task_module, task_options
from attnkit.tasks.options import config_from_args
from tests.cli.test_train_cli import _grammar_conllu
from tests.data.test_fsdd import write_set
from tests.data.test_planetoid import write_tiny
from tests.tasks.corpus import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")

# A value different from every task's default, valid with the others' defaults.
OTHER = {"d_model": "48", "num_heads": "2", "d_ff": "40", "num_encoder_layers": "1", "dropout": "0.05",
         "attention_dropout": "0.15", "activation": "gelu_tanh", "positional": "learned"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    conllu = _grammar_conllu(root / "train.conllu", 20, 0)
    tsv = root / "train.tsv"
    tsv.write_text("".join(f"text {i} good\t{i % 2}\n" for i in range(20)), encoding="utf-8")
    write_set(root / "fsdd" / "recordings", digits=(0, 1), indices=range(6))
    write_set(root / "digits" / "recordings", digits=range(10), indices=range(11))  # asr: every digit in each pool
    (root / "planetoid").mkdir()
    write_tiny(root / "planetoid")
    pairs = write_corpus(root / "mt", n_train=20, n_dev=4)
    return {"translate": ["--train-src", str(pairs["train_src"]), "--train-tgt", str(pairs["train_tgt"]),
                          "--vocab-size", "60"],
            "tagger": ["--train", str(conllu)], "classifier": ["--train", str(tsv)],
            "image": ["--dataset", "digits"], "speech": ["--data-dir", str(root), "--n-mels", "16"],
            "graph": ["--data-dir", str(root)],
            "asr": ["--data", str(root / "digits"), "--train-utterances", "4", "--dev-utterances", "2",
                    "--test-utterances", "2"]}


def model_config(task: str, argv: list[str], out) -> dict:
    args = build_parser().parse_args(["train", task, "--out", str(out), *argv])  # translate writes bpe.json there
    return task_module(task).build(args, config_from_args(TransformerConfig, args), seed=0).meta["model"]


def encoder_options(task: str) -> list[str]:
    group = next(g for g in build_parser()._subparsers._group_actions[0].choices["train"]._subparsers
                 ._group_actions[0].choices[task]._action_groups if g.title.startswith("encoder"))
    return [a.dest for a in group._group_actions]


@pytest.mark.parametrize("task", list(TASKS))
def test_every_offered_encoder_option_changes_the_model(task, data, tmp_path):
    offered = encoder_options(task)
    assert offered == list(task_options(task).ENCODER_FIELDS)
    base = model_config(task, data[task], tmp_path / "base")
    for name in offered:
        flag = "--" + name.replace("_", "-")
        argv = [f"--no-{flag[2:]}" if base_is_on(task, name) else flag] if name == "norm_first" else [flag, OTHER[name]]
        assert model_config(task, data[task] + argv, tmp_path / name) != base, f"train {task}: {argv} changes nothing"


def base_is_on(task: str, name: str) -> bool:
    return bool(task_options(task).ENCODER_DEFAULTS.get(name, getattr(TransformerConfig(), name)))
