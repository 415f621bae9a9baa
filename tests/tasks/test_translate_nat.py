"""The NAT side of the translate task: Mask-Predict training learns, distillation is cached, wrong options fail."""

import json
import random
import re

import pytest
import torch
import torch.nn.functional as F

import attnkit
from attnkit.cli.main import main
from attnkit.data.bpe import UNK_ID
from attnkit.generation import mask_predict
from attnkit.models.nat import NATConfig, NATModel
from attnkit.nn import TransformerConfig
from attnkit.tasks.distill import distill
from attnkit.tasks.translate_nat import collate, forward
from attnkit.tasks.translator import TranslationWarning
from attnkit.train import IGNORE

from .corpus import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--d-model", "32", "--num-heads", "2", "--d-ff", "64", "--num-encoder-layers", "1", "--num-decoder-layers",
        "1", "--no-progress", "--vocab-size", "60", "--batch-tokens", "400", "--warmup-steps", "5", "--average", "0"]


@pytest.mark.parametrize("length,steps", [("classifier", 400), ("end", 250)])
def test_mask_predict_training_learns_a_mapping(length, steps):
    """Targets are the source ids + 1 (lengths 3..8): trained with the task's own loss, one pass writes
    (nearly) every training target exactly, at the right length. (Rows cut at END learn the alignment
    of target to source positions sooner: the END filling teaches where the source ends.)"""
    rng, v = random.Random(0), 20
    pairs = []
    for _ in range(64):
        s = [rng.randint(4, v - 2) for _ in range(rng.randint(3, 8))]
        pairs.append((torch.tensor(s + [2]), torch.tensor([x + 1 for x in s] + ([2] if length == "end" else []))))
    tc = TransformerConfig(d_model=32, num_heads=2, d_ff=64, num_encoder_layers=1, num_decoder_layers=1, dropout=0.0,
                           norm_first=True)
    cfg = NATConfig(v, v, tc, share_embeddings=True, max_positions=24, length=length, max_length_offset=4,
                    row_ratio=1.0, row_extra=2, length_loss_weight=0.1)
    model = NATModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        batch = collate([pairs[i] for i in rng.sample(range(64), 16)], cfg)
        logits, labels, *extra = forward(model, batch, cfg)
        assert (labels != IGNORE).sum() >= 16  # at least one masked target per row
        loss = F.cross_entropy(logits, labels, ignore_index=IGNORE) + sum(extra)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    src = torch.nn.utils.rnn.pad_sequence([p[0] for p in pairs], batch_first=True)
    out = mask_predict(model, src, (src != 0).long(), iterations=1, length_candidates=1)
    want = [[1, *p[1].tolist()] + ([] if length == "end" else [2]) for p in pairs]
    got = [out.sequences[i, :len(w)].tolist() for i, w in enumerate(want)]
    assert sum(g == w for g, w in zip(got, want)) >= 60  # of 64
    assert out.lengths.tolist() == [len(w) - 1 for w in want]


def test_collate_fills_rows_cut_at_end():
    cfg = NATConfig(20, 20, TransformerConfig(d_model=8, num_heads=2, d_ff=8), length="end", row_ratio=1.0,
                    row_extra=1)
    src, mask, rows, lengths = collate([(torch.tensor([5, 6, 2]), torch.tensor([7, 2])),
                                        (torch.tensor([5, 2]), torch.tensor([8, 9, 10, 11, 2]))], cfg)
    assert lengths.tolist() == [4, 5]  # max(own length, S + 1)
    assert rows.tolist() == [[7, 2, 2, 2, 0], [8, 9, 10, 11, 2]] and mask.tolist() == [[1, 1, 1], [1, 1, 0]]


def test_cli_distillation_training_translation_and_clear_errors(tmp_path, capsys):
    c = write_corpus(tmp_path / "corpus", n_train=120, n_dev=10)
    data = ["--train-src", str(c["train_src"]), "--train-tgt", str(c["train_tgt"]), "--dev-src", str(c["dev_src"]),
            "--dev-tgt", str(c["dev_tgt"])]
    ar, nat = tmp_path / "ar", tmp_path / "nat"
    assert main(["train", "translate", *data, *TINY, "--max-steps", "6", "--out", str(ar)]) == 0
    capsys.readouterr()
    args = ["train", "translate", *data, *TINY, "--max-steps", "6", "--decoder", "nat", "--teacher", str(ar),
            "--distill-beam", "2", "--iterations", "3", "--out", str(nat)]
    assert main(args) == 0
    cap = capsys.readouterr()
    assert "distillation: 120 sentences, beam 2, decoded in" in cap.err
    assert "NAT mask-predict 3 iterations, 3 length candidates" in cap.out  # the dev BLEU after training
    notes = list((nat / "distill").glob("*.json"))
    assert len(notes) == 1 and json.loads(notes[0].read_text())["beam"] == 2
    outputs = notes[0].with_suffix(".txt").read_text(encoding="utf-8").split("\n")
    teacher = attnkit.load_pretrained(ar)
    sources = c["train_src"].read_text(encoding="utf-8").splitlines()
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))  # distill decodes shortest first
    expected = teacher.translate([sources[i] for i in order], num_beams=2)
    assert len(outputs) == 121 and [outputs[i] for i in order] == expected  # one line per training source
    meta = json.loads((nat / "ckpt-00000006" / "meta.json").read_text())
    assert meta["decoder"] == "nat" and meta["model"]["length"] == "classifier" and meta["teacher"]["beam"] == 2
    # another run with the same teacher, sources and beam reads the cached translations
    (tmp_path / "nat3" / "distill").mkdir(parents=True)
    for f in (nat / "distill").iterdir():
        (tmp_path / "nat3" / "distill" / f.name).write_bytes(f.read_bytes())
    capsys.readouterr()
    assert main([*args[:-1], str(tmp_path / "nat3")]) == 0
    assert "from the cache" in capsys.readouterr().err

    # a killed distillation continues from its partial file (a line cut by the kill is decoded again)
    key = notes[0].stem
    part = tmp_path / "nat4" / "distill" / f"{key}.partial.jsonl"
    part.parent.mkdir(parents=True)
    part.write_text("".join(json.dumps({"i": i, "t": f"done {i}"}) + "\n" for i in range(10)) + '{"i": 10, "t": "cu',
                    encoding="utf-8")
    lines, note = distill(ar, sources, tmp_path / "nat4", src_lang=str(c["train_src"]), tgt_lang=str(c["train_tgt"]),
                          beam=2, progress=False)
    rest = sorted(range(10, len(sources)), key=lambda i: len(sources[i]))
    assert lines[:10] == [f"done {i}" for i in range(10)]
    assert [lines[i] for i in rest] == teacher.translate([sources[i] for i in rest], num_beams=2)
    assert not note["cached"] and not part.exists() and (part.parent / f"{key}.txt").exists()

    tr = attnkit.load_pretrained(nat)
    with pytest.warns(TranslationWarning, match="empty"):
        assert tr.decoding == "nat" and len(tr.translate(["Ein mann sieht ein auto.", ""], iterations=2)) == 2
    assert main(["translate", str(nat), "Ein hund hat ein ball.", "--iterations", "1", "--length-candidates", "1"]) == 0
    capsys.readouterr()
    # the cross-attention of the decoder over its translation: each position's weights over the source sum to 1
    text = "Ein hund hat ein ball."
    al = tr.attend(text, iterations=2)
    ids, mask = tr.batch([tr.source_ids(text)])
    res = tr.generate(ids, mask, iterations=2)
    cfg = tr.model.config.transformer
    assert al.translation == tr.translate([text], iterations=2)[0]
    assert len(al.source) == ids.shape[1] and len(al.target) == int(res.lengths[0]) - 1  # END follows the row
    assert al.weights.shape == (cfg.num_decoder_layers, cfg.num_heads, len(al.target), len(al.source))
    torch.testing.assert_close(al.weights.sum(-1), torch.ones(al.weights.shape[:-1]))
    att = tmp_path / "att"
    assert main(["translate", str(nat), text, "--iterations", "2", "--attention", str(att)]) == 0
    capsys.readouterr()
    layers = [f"cross_attention_0_layer{i + 1}.png" for i in range(cfg.num_decoder_layers)]
    assert sorted(p.name for p in att.iterdir()) == sorted(["attention_0.html", "cross_attention_0.html",
                                                           "cross_attention_0_lecture.html",
                                                           "decoder_self_attention_0_lecture.html", *layers])
    from attnkit.viz.lecture import read_lecture_html

    page = read_lecture_html(att / "cross_attention_0_lecture.html")
    assert page["keys"] == al.source and page["q"].shape[0] == cfg.num_decoder_layers
    half = attnkit.load_pretrained(nat, dtype=torch.bfloat16)  # a NAT run in bfloat16 too
    assert {p.dtype for p in half.model.parameters()} == {torch.bfloat16}
    assert len(half.translate(["Ein mann sieht ein auto.", "Ein hund."], iterations=2)) == 2
    # the wrong kind of decoding for the run, the wrong kind of teacher: one clear line each
    for argv, match in (
            (["translate", str(nat), "Ein hund.", "--beam", "4"], "--beam is for autoregressive runs"),
            (["translate", str(ar), "Ein hund.", "--iterations", "4"], "for non-autoregressive runs"),
            (["translate", str(ar), "Ein hund.", "--blank-penalty", "1"], "--blank-penalty is for non-autoregressive"),
            (["evaluate", str(ar), "--data", str(c["dev_src"]), "--ref", str(c["dev_tgt"]), "--length-candidates",
              "2"], "for non-autoregressive runs"),
            (["train", "translate", *data, *TINY, "--max-steps", "1", "--teacher", str(ar), "--out",
              str(tmp_path / "x")], "--teacher .* is for --decoder nat"),
            (["train", "translate", *data, *TINY, "--max-steps", "1", "--decoder", "nat", "--teacher", str(nat),
              "--out", str(tmp_path / "y")], "the teacher must be autoregressive")):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert re.search(match, err) and len(err.strip().splitlines()) == 1, (argv, err)
    with pytest.raises(ValueError, match="num_beams is an option of autoregressive decoding"):
        tr.translate(["Ein hund."], num_beams=4)
    with pytest.raises(ValueError, match="iterations is an option of non-autoregressive runs"):
        teacher.translate(["Ein hund."], iterations=4)


def test_a_resumed_nat_run_equals_an_uninterrupted_one(tmp_path):
    from safetensors.torch import load_file

    c = write_corpus(tmp_path / "corpus", n_train=60, n_dev=6)
    data = ["--train-src", str(c["train_src"]), "--train-tgt", str(c["train_tgt"]), "--dev-src", str(c["dev_src"]),
            "--dev-tgt", str(c["dev_tgt"]), "--decoder", "nat", "--eval-every", "3", "--iterations", "1", *TINY]
    assert main(["train", "translate", *data, "--max-steps", "6", "--out", str(tmp_path / "a")]) == 0
    assert main(["train", "translate", *data, "--max-steps", "3", "--out", str(tmp_path / "b")]) == 0
    assert main(["train", "translate", *data, "--max-steps", "6", "--out", str(tmp_path / "b"), "--resume"]) == 0
    a, b = (load_file(str(tmp_path / r / "ckpt-00000006" / "model.safetensors")) for r in "ab")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["length_head.weight"], load_file(str(tmp_path / "b" / "ckpt-00000003" /
                                                                   "model.safetensors"))["length_head.weight"])


def test_init_starts_from_the_autoregressive_run(tmp_path, capsys):
    """--init: the NAT model's embeddings, encoder and decoder start as the AR run's best weights (the length
    head fresh), with its vocabulary; the wrong kind of run or a shape that does not fit is one clear line."""
    from safetensors.torch import load_file

    c = write_corpus(tmp_path / "corpus", n_train=60, n_dev=6)
    data = ["--train-src", str(c["train_src"]), "--train-tgt", str(c["train_tgt"]), "--dev-src", str(c["dev_src"]),
            "--dev-tgt", str(c["dev_tgt"])]
    ar, nat = tmp_path / "ar", tmp_path / "nat"
    assert main(["train", "translate", *data, *TINY, "--max-steps", "4", "--out", str(ar)]) == 0
    nat_args = ["train", "translate", *data, *TINY, "--decoder", "nat", "--iterations", "1", "--init", str(ar)]
    # one step of a learning rate warming up over 10^7 steps (1e-10): the weights move by about that
    assert main([*nat_args, "--max-steps", "1", "--warmup-steps", "10000000", "--out", str(nat)]) == 0
    assert "initialised from" in capsys.readouterr().err
    start = load_file(str(ar / json.loads((ar / "best.json").read_text())["path"] / "model.safetensors"))
    after = load_file(str(nat / "ckpt-00000001" / "model.safetensors"))
    assert set(after) - set(start) == {"length_head.weight", "length_head.bias"}
    assert all(torch.allclose(after[k], start[k], rtol=0, atol=1e-8) for k in start)
    assert not torch.allclose(after["length_head.bias"], torch.zeros(()))  # the head: a random start
    assert (nat / "bpe.json").read_bytes() == (ar / "bpe.json").read_bytes()
    meta = json.loads((nat / "ckpt-00000001" / "meta.json").read_text())
    assert meta["init"] == str(ar)
    for argv, match in (
            ([*nat_args[:-1], str(nat), "--max-steps", "1", "--out", str(tmp_path / "x")],
             "--init: .* is a non-autoregressive translation run"),
            ([*nat_args, "--d-ff", "48", "--max-steps", "1", "--out", str(tmp_path / "y")], "do not fit the model"),
            (["train", "translate", *data, *TINY, "--init", str(ar), "--max-steps", "1", "--out", str(tmp_path / "z")],
             "--init .* is for --decoder nat")):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert re.search(match, err) and len(err.strip().splitlines()) == 1, (argv, err)


def test_init_takes_the_first_decoder_layers_of_a_deeper_run(tmp_path, capsys):
    """--init into a NAT decoder of fewer layers: its layers start as the AR run's first ones, the rest are left
    out (and said so); a NAT decoder deeper than the AR run's is one clear line."""
    from safetensors.torch import load_file

    c = write_corpus(tmp_path / "corpus", n_train=60, n_dev=6)
    data = ["--train-src", str(c["train_src"]), "--train-tgt", str(c["train_tgt"]), "--dev-src", str(c["dev_src"]),
            "--dev-tgt", str(c["dev_tgt"]), *TINY]
    ar, nat = tmp_path / "ar", tmp_path / "nat"
    assert main(["train", "translate", *data, "--num-decoder-layers", "2", "--max-steps", "2", "--out", str(ar)]) == 0
    nat_args = ["train", "translate", *data, "--decoder", "nat", "--nat-loss", "ctc", "--init", str(ar)]
    assert main([*nat_args, "--max-steps", "1", "--warmup-steps", "10000000", "--out", str(nat)]) == 0
    assert "its decoder layers 1-1 left out" in capsys.readouterr().err
    start = load_file(str(ar / json.loads((ar / "best.json").read_text())["path"] / "model.safetensors"))
    after = load_file(str(nat / "ckpt-00000001" / "model.safetensors"))
    assert not any(k.startswith("decoder.layers.1.") for k in after)
    first = [k for k in after if k.startswith("decoder.layers.0.")]
    assert first and all(torch.allclose(after[k], start[k], rtol=0, atol=1e-8) for k in first)
    assert main([*nat_args, "--num-decoder-layers", "3", "--max-steps", "1", "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "has 2 decoder layers, fewer than --num-decoder-layers 3" in err and len(err.strip().splitlines()) == 1


def test_glat_and_ctc_runs_train_save_their_loss_and_decode(tmp_path, capsys):
    """--nat-loss glat / ctc: a tiny run each; meta.json keeps the loss and its setting, the run loads back with
    it and decodes (a CTC run in one pass, the length from the alignment); bad values are one line naming the
    option."""
    c = write_corpus(tmp_path / "corpus", n_train=60, n_dev=6)
    data = ["--train-src", str(c["train_src"]), "--train-tgt", str(c["train_tgt"]), "--dev-src", str(c["dev_src"]),
            "--dev-tgt", str(c["dev_tgt"]), "--decoder", "nat", *TINY, "--max-steps", "4"]
    for loss, extra in (("glat", ["--glat-ratio", "0.3", "--iterations", "1"]), ("ctc", ["--ctc-upsample", "3"])):
        out = tmp_path / loss
        assert main(["train", "translate", *data, "--nat-loss", loss, *extra, "--out", str(out)]) == 0
        cap = capsys.readouterr()
        assert "NAT CTC one pass" in cap.out if loss == "ctc" else "NAT one pass, 3 length candidates" in cap.out
        meta = json.loads((out / "ckpt-00000004" / "meta.json").read_text())
        assert meta["model"]["nat_loss"] == loss and meta["nat_decoding"]["iterations"] == 1
        tr = attnkit.load_pretrained(out)
        assert tr.model.config == NATConfig.from_dict(meta["model"])
        assert tr.model.config.glat_ratio == (0.3 if loss == "glat" else 0.5)
        assert tr.model.config.ctc_upsample == (3 if loss == "ctc" else 2)
        res = tr.generate(*tr.batch([tr.source_ids("Ein hund hat ein ball.")]))
        assert res.sequences[0, 0] == 1 and int(res.lengths[0]) >= 1
        assert len(tr.translate(["Ein hund hat ein ball.", "Ein mann."])) == 2
    assert (tmp_path / "ctc" / "ckpt-00000004" / "model.safetensors").exists()
    assert main(["evaluate", str(tmp_path / "ctc"), "--data", str(c["dev_src"]), "--ref", str(c["dev_tgt"])]) == 0
    assert "BLEU" in capsys.readouterr().out
    ctc = attnkit.load_pretrained(tmp_path / "ctc")
    al = ctc.attend("Ein hund hat ein ball.")  # the one pass over 3 x S mask tokens, each position's label
    s = len(ctc.source_ids("Ein hund hat ein ball."))
    assert len(al.target) == 3 * s and al.weights.shape[2:] == (3 * s, s)
    row = ctc.model.output_logits(ctc.model.decode_parallel(torch.ones(1, 3 * s, dtype=torch.long), ctc.model.encode(
        torch.tensor([ctc.source_ids("Ein hund hat ein ball.")]))).last_hidden_state[0]).argmax(-1)
    assert al.target == ["_" if i == 0 else ctc._piece(i) for i in row.tolist()]
    with pytest.raises(ValueError, match=r"iterations \(--iterations\) must be 1 for this run.*CTC"):
        ctc.translate(["Ein hund."], iterations=4)
    # a blank penalty writes a token at more positions: with 100 at every one (repeats still merge)
    src = ctc.batch([ctc.source_ids("Ein hund hat ein ball.")])
    pen, base = ctc.generate(*src, blank_penalty=100.0), ctc.generate(*src)
    assert int(pen.lengths[0]) >= int(base.lengths[0])
    cfg = ctc.model.config
    logits = ctc.model.output_logits(ctc.model.decode_parallel(torch.ones(1, 3 * s, dtype=torch.long),
                                                               ctc.model.encode(torch.tensor([ctc.source_ids(
                                                                   "Ein hund hat ein ball.")]))).last_hidden_state[0])
    logits[:, [cfg.mask_id, cfg.eos_token_id, UNK_ID]] = float("-inf")  # never written by a translation
    logits[:, cfg.blank_id] -= 100.0
    labels = logits.argmax(-1).tolist()
    assert cfg.blank_id not in labels
    want = [i for j, i in enumerate(labels) if j == 0 or i != labels[j - 1]]
    assert pen.sequences[0, 1:int(pen.lengths[0])].tolist() == want
    assert "blank penalty 1.5" in ctc.describe({"blank_penalty": 1.5})
    with pytest.raises(ValueError, match="blank_penalty \\(--blank-penalty\\) is for runs trained with CTC"):
        attnkit.load_pretrained(tmp_path / "glat").translate(["Ein hund."], blank_penalty=1.0)
    for argv, match in (
            ([*data, "--nat-loss", "ctcx"], "argument --nat-loss: invalid choice: 'ctcx'"),
            ([*data, "--nat-loss", "glat", "--glat-ratio", "1.5"], "argument --glat-ratio: .*1.5"),
            ([*data, "--nat-loss", "ctc", "--ctc-upsample", "0"], "argument --ctc-upsample: .*0"),
            ([*data, "--nat-loss", "ctc", "--length", "end"], "--length end does not go with --nat-loss ctc"),
            (["translate", str(tmp_path / "ctc"), "Ein hund.", "--length-candidates", "3"],
             "length_candidates \\(--length-candidates\\) must be 1"),
            (["translate", str(tmp_path / "ctc"), "Ein hund.", "--blank-penalty", "nan"],
             "argument --blank-penalty: .*nan"),
            (["translate", str(tmp_path / "glat"), "Ein hund.", "--blank-penalty", "1"],
             "blank_penalty \\(--blank-penalty\\) is for runs trained with CTC")):
        argv = argv if argv[0] == "translate" else ["train", "translate", *argv, "--out", str(tmp_path / "bad")]
        try:
            code = main(argv)
        except SystemExit as e:  # refused while parsing
            code = e.code
        assert code in (1, 2)
        err = capsys.readouterr().err
        assert re.search(match, err) and len(err.strip().splitlines()) == 1, (argv, err)
