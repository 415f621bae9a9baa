"""Nothing goes silent in a log: with a fake clock (``progress.clock``) that the slow parts advance (a training
step, an evaluation batch, an utterance prepared, a batch decoded), a piped run's stdout has a line at least every
``PLAIN_EVERY`` seconds of that clock, and each plain line says how far it is and the time left."""

from __future__ import annotations

import io
import re

import pytest
import torch

from attnkit.cli.main import main
from attnkit.train import progress
from tests.cli.test_asr_cli import TINY
from tests.data.test_fsdd import write_set

pytestmark = pytest.mark.usefixtures("one_thread")
TIMING = re.compile(r"\((\d+):(\d\d) in(, about (\d+):(\d\d) left)?\)$")


class Stamped(io.StringIO):
    """stdout that notes the fake clock's time at each line written."""

    def __init__(self, clock):
        super().__init__()
        self.clock, self.lines = clock, []

    def write(self, text):
        for line in text.splitlines():
            if line.strip():
                self.lines.append((self.clock.now, line))
        return super().write(text)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def slows(self, monkeypatch, target: str, seconds: float):
        """Every call of ``target`` ("module:attribute" or "module:Class.method") advances the clock by
        ``seconds`` first."""
        import importlib

        module, _, path = target.partition(":")
        owner = importlib.import_module(module)
        *outer, name = path.split(".")
        for part in outer:
            owner = getattr(owner, part)
        real = getattr(owner, name)

        def slow(*a, **kw):
            self.now += seconds
            return real(*a, **kw)

        monkeypatch.setattr(owner, name, slow)


def gaps(stamped: Stamped, end: float) -> list[float]:
    times = [0.0] + [t for t, _ in stamped.lines] + [end]
    return [b - a for a, b in zip(times, times[1:])]


def shown(stamped: Stamped) -> str:
    return "\n" + "\n".join(f"{t:7.1f}  {line}" for t, line in stamped.lines)


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(progress, "clock", fake)
    return fake


def test_training_between_logged_steps_and_a_long_evaluation(tmp_path, monkeypatch, clock):
    clock.slows(monkeypatch, "attnkit.train.engine:Trainer.train_step", 3.0)  # 3 s a step
    clock.slows(monkeypatch, "attnkit.train.evaluation:count_correct", 4.0)  # 4 s an evaluation batch
    out = Stamped(clock)
    monkeypatch.setattr("sys.stdout", out)
    argv = ["train", "image", "--dataset", "digits", "--max-steps", "40", "--log-every", "1000", "--eval-every",
            "20", "--eval-batch-size", "64", "--batch-size", "16", "--d-model", "16", "--num-heads", "2", "--d-ff",
            "32", "--num-encoder-layers", "1", "--threads", "1", "--no-progress", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert clock.now == 40 * 3 + 12 * 4  # 40 steps; two dev evaluations and a test one, 12 batches of 64 in all
    assert max(gaps(out, clock.now)) <= progress.PLAIN_EVERY, shown(out)
    steps = [(t, line) for t, line in out.lines if re.match(r"step \d+/40  \(", line)]
    numbers = [int(line.split()[1].split("/")[0]) for _, line in steps]
    assert len(steps) >= 11 and max(b - a for a, b in zip(numbers, numbers[1:])) <= 3  # 3 s a step: every 3rd
    for (t, line), done in zip(steps, numbers):  # each says its time in and the time left at the pace so far
        m = TIMING.search(line)
        assert m and 60 * int(m[1]) + int(m[2]) == round(t), line
        assert 60 * int(m[4]) + int(m[5]) == round(t / done * (40 - done)), line
    scoring = [line for _, line in out.lines if line.startswith(("dev: scoring", "test: scoring"))]
    assert scoring and all(re.match(r"(dev|test): scoring: \d+/\d+ examples  \(", line) for line in scoring)


def test_train_asr_prepares_and_decodes_aloud(tmp_path, monkeypatch, clock):
    root = tmp_path / "data"
    write_set(root / "fsdd" / "recordings", speakers=("alice", "bob"), digits=range(10), indices=range(11))
    clock.slows(monkeypatch, "attnkit.tasks.asr_sets:log_mel", 2.5)  # preparing: 2.5 s an utterance
    clock.slows(monkeypatch, "attnkit.train.engine:Trainer.train_step", 3.0)
    clock.slows(monkeypatch, "attnkit.tasks.transcriber:Transcriber._decode_batch", 6.0)  # a batch decoded
    out = Stamped(clock)
    monkeypatch.setattr("sys.stdout", out)
    argv = ["train", "asr", "--data-dir", str(root), "--holdout-speaker", "bob", "--out", str(tmp_path / "run"),
            *[a for a in TINY if a != "--train-utterances" and a != "12"], "--train-utterances", "20"]
    assert main(argv) == 0
    assert max(gaps(out, clock.now)) <= progress.PLAIN_EVERY, shown(out)
    prepared = [line for _, line in out.lines if line.startswith("prepare train: ")]
    assert prepared and re.match(r"prepare train: \d+/20 utterances  \(0:\d\d in, about 0:\d\d left\)$", prepared[0])
    decoding = [line for _, line in out.lines if ": decoding, " in line]
    said = re.compile(r"(recordings held out|speaker held out \(bob\)): decoding, (CTC one pass|beam 5 \+ CTC 0\.5): "
                      r"3/3 utterances  \(0:06 in, about 0:00 left\)$")
    assert len(decoding) == 4 and all(said.match(line) for line in decoding), decoding  # 6 s each: all said


def test_train_translate_in_a_log_never_goes_quiet(tmp_path, monkeypatch, clock):
    """``train translate`` piped: training between logged steps, the dev evaluations, the averaging and the closing
    BLEU translation all say how far they are, never 10 s of the (fake) clock without a line."""
    from tests.tasks.corpus import write_corpus
    from tests.tasks.test_translate import SMALL, files_args

    paths = write_corpus(tmp_path / "data", n_train=120, n_dev=30)
    clock.slows(monkeypatch, "attnkit.train.engine:Trainer.train_step", 3.0)  # 3 s a step
    clock.slows(monkeypatch, "attnkit.train.evaluation:count_correct", 4.0)  # 4 s an evaluation batch
    clock.slows(monkeypatch, "attnkit.tasks.translator:Translator.generate", 4.0)  # 4 s a batch translated
    out = Stamped(clock)
    monkeypatch.setattr("sys.stdout", out)
    argv = ["train", "translate", *files_args(paths), *SMALL, "--max-steps", "30", "--eval-every", "15",
            "--log-every", "1000", "--eval-batch-size", "4", "--average", "2", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert clock.now >= 30 * 3.0 + 2 * 8 * 4.0  # every step and two dev evaluations of 8 batches went slow
    assert max(gaps(out, clock.now)) <= progress.PLAIN_EVERY, shown(out)
    steps = [line for _, line in out.lines if re.match(r"step \d+/30  \(", line)]  # between logged steps
    assert len(steps) >= 9 and all(TIMING.search(line) for line in steps), steps
    assert any(line.startswith("dev: scoring: ") for _, line in out.lines), shown(out)
    assert any(line.startswith("averaged 2 checkpoints") for _, line in out.lines), shown(out)
    assert any("BLEU" in line for _, line in out.lines), shown(out)  # the closing translation of the dev texts


def test_translating_in_a_log_says_how_far(monkeypatch, clock):
    """The closing BLEU of ``train translate`` translates the dev texts batch by batch: plain lines in a log."""

    from attnkit.generation.texts import translate_texts

    class Out:
        def __init__(self, ids):
            self.sequences = ids

    def generate(ids, mask):
        clock.now += 4.0  # 4 s a batch
        return Out(ids)

    out = Stamped(clock)
    monkeypatch.setattr("sys.stdout", out)
    texts = [f"text {i}" for i in range(40)]
    got = translate_texts(texts, source_ids=lambda text, where: [len(text), 1], generate=generate, pad_id=0,
                          decode=lambda row: str(row.tolist()), batch_size=4, progress=None)
    assert len(got) == 40 and clock.now == 40.0
    assert max(gaps(out, clock.now)) <= progress.PLAIN_EVERY, shown(out)
    assert [line for _, line in out.lines][:2] == ["translate: 8/40 texts  (0:08 in, about 0:32 left)",
                                                   "translate: 16/40 texts  (0:16 in, about 0:24 left)"]
    out.lines.clear()
    translate_texts(texts, source_ids=lambda text, where: [len(text), 1], generate=generate, pad_id=0,
                    decode=lambda row: "", batch_size=4)  # the API's default: silent
    assert out.lines == []
    said = []  # the command line's translate: the lines go to a function of its own (stderr), not to stdout
    clock.now = 0.0
    translate_texts(texts, source_ids=lambda text, where: [len(text), 1], generate=generate, pad_id=0,
                    decode=lambda row: "", batch_size=4, progress=said.append)
    assert out.lines == [] and said[:2] == ["translate: 8/40 texts  (0:08 in, about 0:32 left)",
                                            "translate: 16/40 texts  (0:16 in, about 0:24 left)"]


def test_an_experiment_says_how_far_while_it_trains(tmp_path, monkeypatch, clock):
    """``experiment positions --quick``: a line at least every 10 s while a model trains (``runner.train_steps``),
    and each finished run says how many are done and the time left."""
    clock.slows(monkeypatch, "attnkit.experiments.runner:lr_factor", 3.0)  # read once a step: 3 s a step
    out = Stamped(clock)
    monkeypatch.setattr("sys.stdout", out)
    argv = ["experiment", "positions", "--quick", "--encodings", "sinusoidal,none", "--seeds", "1", "--threads", "1",
            "--out", str(tmp_path / "positions")]
    assert main(argv) == 0
    assert clock.now == 2 * 6 * 3.0  # two runs of the quick six steps
    assert max(gaps(out, clock.now)) <= progress.PLAIN_EVERY, shown(out)
    training = [line for _, line in out.lines if ": training: " in line]
    assert training and all(re.match(r"  (sinusoidal|none), seed 0: training: \d/6 steps  \(0:\d\d in, about "
                                      r"0:\d\d left\)$", line) for line in training), training
    runs = [line for _, line in out.lines if "runs, " in line]  # one row per test length, each run's say the same
    assert [line.rsplit("[", 1)[1] for line in runs] == ["1/2 runs, 0:18 in, about 0:18 left]"] * 2 + \
        ["2/2 runs, 0:36 in, about 0:00 left]"] * 2


def test_attend_writes_its_pngs_aloud(tmp_path, monkeypatch, clock):
    from tests.pretrained.test_loader import make_folder

    folder = make_folder(tmp_path / "tiny")  # 2 layers x 2 heads
    clock.slows(monkeypatch, "attnkit.viz.grid:AttentionGrid.write", 6.0)  # 6 s a layer's PNG
    clock.slows(monkeypatch, "attnkit.viz:attention_heatmap", 6.0)
    out = Stamped(clock)
    monkeypatch.setattr("sys.stdout", out)
    assert main(["attend", "I saw a saw", "--model", str(folder), "--out", str(tmp_path / "out"), "--figures", "png",
                 "--each-head", "--threads", "1"]) == 0
    assert clock.now == 7 * 6.0  # the overview (drawn by AttentionGrid too), two layers and their four heads
    assert max(gaps(out, clock.now)) <= progress.PLAIN_EVERY, shown(out)
    said = [line for _, line in out.lines if line.startswith("attend: PNG files: ")]
    assert said[-1] == "attend: PNG files: 7/7 written  (0:42 in, about 0:00 left)", said
    assert all(re.match(r"attend: PNG files: \d/7 written  \(0:\d\d in(, about 0:\d\d left)?\)$", line)
               for line in said), said


def test_dev_bleu_translates_aloud_on_the_main_process_only(monkeypatch):
    """``--select bleu`` translates the dev set at every evaluation: ``progress`` (None: plain lines in a log) goes
    to the translation on the main process, nothing on the others."""
    from attnkit.tasks import translation
    from attnkit.train import distributed

    seen = []

    class FakeTranslator:
        def __init__(self, model, subwords, meta):
            pass

        def translate(self, texts, progress=False, **kw):
            seen.append(progress)
            return list(texts)

    class FakeDecoding:
        translator_class = FakeTranslator

        def final_kwargs(self, beam):
            return {"num_beams": beam}

    texts = ["a man rides a bike down the road", "two dogs play in the snow today"]
    dev = translation.Corpus(src=texts, tgt=texts, lines=[1, 2])  # translated as they are: BLEU 100
    score = translation.dev_bleu(FakeDecoding(), None, {}, dev, progress=None)
    assert score(torch.nn.Linear(1, 1))["bleu"] == pytest.approx(100.0) and seen == [None]
    monkeypatch.setattr(distributed, "is_main", lambda: False)
    score(torch.nn.Linear(1, 1))
    assert seen == [None, False]


def test_transcribe_many_files_says_how_far_on_stderr(tmp_path, monkeypatch, clock):
    """``transcribe`` of many files, piped: a plain line on stderr at least every 10 s while it reads, prepares and
    decodes; stdout holds the transcripts alone, the same as with --no-progress."""
    import numpy as np
    import soundfile

    from attnkit.data.audio import FeatureConfig
    from attnkit.tasks.transcriber import Transcriber
    from tests.models.test_asr import tiny_asr

    tr = Transcriber(tiny_asr(5), {"features": FeatureConfig(n_mels=8).to_dict()}, batch_size=2)  # untrained
    monkeypatch.setattr("attnkit.cli.asr.open_transcriber", lambda path, which="best": tr)
    files = [str(tmp_path / f"{k:02d}.wav") for k in range(12)]
    for k, f in enumerate(files):
        soundfile.write(f, 0.3 * np.sin(np.arange(4000 + 100 * k) / (3.0 + k)), 8000)
    clock.slows(monkeypatch, "attnkit.data.sound:read_audio", 1.0)  # 1 s a file read
    clock.slows(monkeypatch, "attnkit.tasks.transcriber:Transcriber.prepare", 1.5)  # 1.5 s a recording cleaned
    clock.slows(monkeypatch, "attnkit.tasks.transcriber:Transcriber._decode_batch", 7.0)  # 7 s a batch of 2
    out, err = Stamped(clock), Stamped(clock)
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    assert main(["transcribe", "run", *files, "--threads", "1"]) == 0
    assert clock.now == 12 * 1.0 + 12 * 1.5 + 6 * 7.0
    assert max(gaps(err, clock.now)) <= progress.PLAIN_EVERY, shown(err)
    said = re.compile(r"transcribe: (reading: \d+/12 files|preparing: \d+/12 recordings|decoding, beam 5 \+ CTC 0\.3: "
                      r"\d+/12 recordings)  \(\d:\d\d in(, about \d:\d\d left)?\)$")
    assert all(said.match(line) for _, line in err.lines), shown(err)
    assert {line.split(":")[1].split(",")[0] for _, line in err.lines} == {" reading", " preparing", " decoding"}
    last = "transcribe: decoding, beam 5 + CTC 0.3: 12/12 recordings  (0:42 in, about 0:00 left)"  # its own 42 s
    assert err.lines[-1][1] == last, shown(err)
    printed = [line for _, line in out.lines]
    assert [line.split("\t")[0] for line in printed] == files  # one line per file, in order: nothing else
    assert all(re.fullmatch(r"[0-9 ]*", line.split("\t")[1]) for line in printed), printed
    quiet_out, quiet_err = Stamped(clock), Stamped(clock)
    monkeypatch.setattr("sys.stdout", quiet_out)
    monkeypatch.setattr("sys.stderr", quiet_err)
    assert main(["transcribe", "run", *files, "--threads", "1", "--no-progress"]) == 0
    assert quiet_err.lines == [] and [line for _, line in quiet_out.lines] == printed


def test_embed_many_texts_says_how_far_on_stderr(tmp_path, monkeypatch, clock):
    """``embed --file`` of many texts, piped: a plain line on stderr at least every 10 s; stdout holds the vectors."""
    import json

    from tests.pretrained.test_loader import make_folder

    folder = make_folder(tmp_path / "tiny")
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"sentence number {i}\n" for i in range(40)), encoding="utf-8")
    clock.slows(monkeypatch, "attnkit.pretrained.encoder:SentenceEncoder._hidden", 4.0)  # 4 s a batch of 4
    out, err = Stamped(clock), Stamped(clock)
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    assert main(["embed", "--file", str(texts), "--model", str(folder), "--batch-size", "4", "--workers", "1",
                 "--threads", "1"]) == 0
    assert clock.now == 10 * 4.0
    assert max(gaps(err, clock.now)) <= progress.PLAIN_EVERY, shown(err)
    assert [line for _, line in err.lines][:2] == ["encode: 8/40 texts  (0:08 in, about 0:32 left)",
                                                   "encode: 16/40 texts  (0:16 in, about 0:24 left)"]
    assert err.lines[-1][1] == "encode: 40/40 texts  (0:40 in, about 0:00 left)"
    rows = [json.loads(line) for _, line in out.lines]  # JSON lines alone
    assert [r["text"] for r in rows] == [f"sentence number {i}" for i in range(40)]
