"""Decoding step by step (`translate --steps`): the greedy walk is the translation, each step's probabilities are
the model's own (its teacher-forced logits), a forced token changes the rest as greedy decoding from there would,
a NAT run's passes are mask_predict's; the pages show these numbers and their controls work in Chromium."""

import numpy as np
import pytest
import torch

import attnkit
from attnkit.cli.main import main
from attnkit.viz.steps_page import read_steps_html
from attnkit.viz.translation import steps_page
from tests.pretrained.translation_run import make_run
from tests.viz.test_decoder import TEXT, nat_run


def teacher_forced(tr, ids, mask, tokens, suppress):
    """The model's probabilities (T, V) at every step of a walk writing ``tokens``, by one forward pass."""
    rows = torch.tensor([[tr.config.start_token_id, *tokens[:-1]]])
    with torch.no_grad():
        logp = tr.model(ids, mask, rows)[0].float().log_softmax(-1)
    logp[:, suppress] = float("-inf")
    return logp.exp()


def test_autoregressive_steps_forcing_and_the_page(tmp_path, capsys, open_page):
    run = make_run(tmp_path / "ar", seed=1)
    tr = attnkit.load_pretrained(run)
    pieces = [tr._piece(i) for i in range(tr.config.tgt_vocab_size)]
    ids, mask = tr.batch([tr.source_ids(TEXT)])
    greedy = tr.generate(ids, mask, num_beams=1, max_new_tokens=8)
    n = int(greedy.lengths[0])
    free = greedy.sequences[0, 1:1 + n].tolist()
    probs = teacher_forced(tr, ids, mask, free, tr._step_options(ids.shape[1])["suppress_tokens"])
    second = int(probs[1].topk(2).indices[1])  # step 2's runner-up, forced
    assert main(["translate", str(run), TEXT, "--steps", str(tmp_path / "st"), "--max-new-tokens", "8",
                 "--force", f"2:{pieces[second]}", "--candidates", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == tr.translate([TEXT], max_new_tokens=8)[0] and out[1] == f"steps of {TEXT!r}:"
    assert out[2].startswith("greedy decoding, step by step") and len([ln for ln in out if " => " in ln]) >= n
    d = read_steps_html(tmp_path / "st" / "steps_0.html")
    walk = d["walks"][0]["steps"]
    assert [s["c"] for s in walk] == free and d["walks"][0]["text"] == out[0]  # the greedy walk is the translation
    for t, s in enumerate(walk):  # the candidates: the model's 4 most likely tokens and their probabilities
        top = probs[t].topk(4)
        assert [c[0] for c in s["top"]] == top.indices.tolist()
        assert np.allclose([c[1] for c in s["top"]], top.values.numpy(), atol=1e-5)
        assert abs(s["p"] - float(probs[t, s["c"]])) < 1e-5
    forced = [s["c"] for s in d["walks"][1]["steps"]]
    assert forced[:2] == [free[0], second] and d["walks"][1]["steps"][1]["f"]
    p2 = teacher_forced(tr, ids, mask, forced, tr._step_options(ids.shape[1])["suppress_tokens"])
    assert p2[2:].argmax(-1).tolist() == forced[2:]  # greedy after the forced step
    alt = d["alternatives"][f"1,{second}"]["steps"]  # the page's continuation of the same choice
    assert [s["c"] for s in alt] == forced[1:]

    page = open_page(tmp_path / "st" / "steps_0.html", width=1300)
    assert page.eval("document.querySelectorAll('#steps tbody tr').length") == n
    assert page.eval("[...document.querySelectorAll('#steps tbody tr:nth-child(3) td:nth-child(2) .tk')]"
                     ".map(e => e.textContent)") == [pieces[1], pieces[free[0]], pieces[free[1]]]  # fed back
    shown = page.eval("[...document.querySelectorAll('#steps tbody tr:nth-child(1) button.tok .num')]"
                      ".map(e => +e.textContent)")
    assert np.allclose(shown, [c[1] for c in walk[0]["top"]], atol=5e-4)
    page.click(f"#steps button[data-step='1'][data-token='{second}']")  # choose the runner-up at step 2
    rows = page.eval("[...document.querySelectorAll('#whatif-steps tbody tr')].map(r => [r.className, "
                     "...[...r.cells].map(c => c.textContent)])")
    assert rows[0][:4] == ["forced", "2", pieces[free[1]], pieces[second]]
    assert [r[3] for r in rows if r[3]] == [pieces[t] for t in forced[1:]]
    assert np.allclose([float(r[4]) for r in rows if r[4]], [s["p"] for s in alt], atol=5e-4)
    differ = sum(a != b for a, b in zip(forced[2:], free[2:])) + abs(len(forced) - len(free))
    summary = page.eval("document.getElementById('whatif-summary').textContent")
    assert f"{differ} of the {len(forced) - 2} later steps" in summary
    page.select("#walk", 1)  # the walk forced on the command line
    assert page.eval("document.querySelectorAll('#steps tbody tr.forced').length") == 1
    assert page.eval("document.querySelector('#steps tbody tr.forced td').textContent") == "2"
    # wrong uses: one line each, naming the option
    steps = ["--steps", str(tmp_path / "st2"), "--max-new-tokens", "8"]
    for argv, words in ((["--force", "2:not-a-piece", *steps], "--force 2:not-a-piece: 'not-a-piece' is not a token"),
                        (["--force", f"{n + 1}:{pieces[second]}", *steps], f"the greedy walk has {n} steps"),
                        (["--force", f"2:{pieces[second]}"], "--force needs --steps DIR")):
        assert main(["translate", str(run), TEXT, *argv]) == 1
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, err
    with pytest.raises(SystemExit):
        main(["translate", str(run), TEXT, *steps, "--force", "2"])
    assert "expected STEP:TOKEN" in capsys.readouterr().err


def test_nat_passes_and_the_page(tmp_path, open_page):
    tr = attnkit.load_pretrained(nat_run(tmp_path))
    path, lines = steps_page(tr, TEXT, tmp_path / "steps.html", iterations=3)
    with pytest.raises(ValueError, match="writes every token at once; there is no step to force"):
        tr.steps(TEXT, force=[(1, "a")], iterations=3)
    ids, mask = tr.batch([tr.source_ids(TEXT)])
    res = tr.generate(ids, mask, iterations=3)
    d = read_steps_html(path)
    kept = d["candidates"][d["chosen"]]
    t = int(res.lengths[0]) - 1
    assert kept["passes"][-1]["tokens"] == res.sequences[0, 1:1 + t].tolist() and kept["length"] == t
    assert [c["length"] for c in d["candidates"]] == res.candidate_lengths[0].tolist()
    assert d["text"] == tr.translate([TEXT], iterations=3)[0] and lines[-1].endswith(d["text"])
    model, cfg = tr.model, tr.model.config
    with torch.no_grad():  # the lengths shown: the classifier's 5 most likely classes, S + offset
        p = model.length_logits(model.encode(ids, mask), mask).softmax(-1)[0].topk(5)
    assert [x[0] for x in d["lengths"]] == (p.indices + ids.shape[1] - cfg.max_length_offset).tolist()
    assert np.allclose([x[2] for x in d["lengths"]], p.values.numpy(), atol=1e-6)
    assert [x[1] for x in d["lengths"][:3]] == res.candidate_lengths[0].tolist()  # the 3 tried, clamped as decoded
    never = [cfg.pad_token_id, cfg.mask_id, cfg.eos_token_id, 3]  # pad, mask, END (length given), <unk>
    for c in d["candidates"]:
        first, n = c["passes"][0], c["length"]
        assert first["masked"] == list(range(n))  # pass 1: a row of start tokens, every token written at once
        with torch.no_grad():
            memory = model.encode(ids, mask)
            h = model.decode_parallel(torch.full((1, n), cfg.mask_id), memory, mask).last_hidden_state
            logp = model.output_logits(h)[0].float().log_softmax(-1)
        logp[:, never] = float("-inf")
        assert first["tokens"] == logp.argmax(-1).tolist()
        assert np.allclose(first["probs"], logp.max(-1).values.exp().numpy(), atol=1e-5)
        for k, (a, b) in enumerate(zip(c["passes"], c["passes"][1:])):  # pass k + 2 re-masks n (N - k - 1) / N
            assert len(b["masked"]) == n * (3 - k - 1) // 3
            keep = [i for i in range(n) if i not in b["masked"]]
            assert [b["tokens"][i] for i in keep] == [a["tokens"][i] for i in keep]
            if len(set(a["probs"])) == n:  # no tie: the re-masked are the least confident
                assert sorted(b["masked"]) == sorted(np.argsort(a["probs"])[:len(b["masked"])].tolist())
    page = open_page(path, width=1300)
    passes = len(kept["passes"])
    assert page.eval("document.querySelectorAll('#passes tr.input').length") == passes
    assert page.eval("document.querySelectorAll('#passes tr.input')[0].querySelectorAll('td.masked-in').length") \
        == kept["length"]
    written = page.eval("[...document.querySelectorAll('#passes tr.output')].map(r => [...r.cells].slice(1)"
                        ".map(c => c.textContent))")
    assert written[-1] == [d["pieces"][str(i)] for i in kept["passes"][-1]["tokens"]]
    assert page.eval("document.querySelectorAll('#length-table tbody tr').length") == len(d["lengths"])
    other = (d["chosen"] + 1) % len(d["candidates"])
    page.select("#cand", other)
    assert page.eval("document.getElementById('cand-text').textContent").startswith(
        f"{d['candidates'][other]['length']} tokens")
    assert page.eval("document.querySelectorAll('#passes tr:first-child th').length") == \
        d["candidates"][other]["length"] + 1


def test_a_marian_folders_steps_are_its_greedy_translation(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    from tests.pretrained.marian_folders import hf_marian, marian_folder

    folder = marian_folder(tmp_path / "m", hf_marian(vocab=30, d=16, enc=1, dec=1, heads=2, ffn=32, seed=5,
                                                     eos_bias=0.0))
    tr = attnkit.load_pretrained(folder)
    got = tr.steps("ein mann fährt fahrrad .", max_new_tokens=8)
    assert got.start == tr.config.start_token_id  # Marian's decoder starts from the pad token
    ids, mask = tr.batch([tr.source_ids("ein mann fährt fahrrad .")])
    out = tr.generate(ids, mask, num_beams=1, max_new_tokens=8)
    assert [s.chosen for s in got.free] == out.sequences[0, 1:1 + int(out.lengths[0])].tolist()
