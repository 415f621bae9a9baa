"""Folder loading on tiny random BERT checkpoints (real tokenizer, random weights), and bad input."""

import json
import shutil
import subprocess
import sys
import warnings

import pytest
import torch
from safetensors.torch import save_file

import attnkit
from attnkit.pretrained import builtin_path, load_pretrained, read_folder
from attnkit.pretrained.loader import resolve

HF_CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 30522, "hidden_size": 8,
             "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16,
             "max_position_embeddings": 24, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
             "pad_token_id": 0}


def tiny_state(cfg=HF_CONFIG, pooler=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    d, f = cfg["hidden_size"], cfg["intermediate_size"]

    def r(*shape):
        return torch.randn(*shape, generator=g) * 0.2

    s = {"embeddings.word_embeddings.weight": r(cfg["vocab_size"], d),
         "embeddings.position_embeddings.weight": r(cfg["max_position_embeddings"], d),
         "embeddings.token_type_embeddings.weight": r(2, d),
         "embeddings.LayerNorm.weight": 1 + r(d), "embeddings.LayerNorm.bias": r(d),
         "embeddings.position_ids": torch.arange(cfg["max_position_embeddings"])[None]}
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            s[p + n + ".weight"], s[p + n + ".bias"] = r(d, d), r(d)
        s[p + "intermediate.dense.weight"], s[p + "intermediate.dense.bias"] = r(f, d), r(f)
        s[p + "output.dense.weight"], s[p + "output.dense.bias"] = r(d, f), r(d)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            s[p + n + ".weight"], s[p + n + ".bias"] = 1 + r(d), r(d)
    if pooler:
        s["pooler.dense.weight"], s["pooler.dense.bias"] = r(d, d), r(d)
    return s


def make_folder(path, state=None, config=HF_CONFIG, bin_file=False, st_files=True, pooling=None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    shutil.copy(builtin_path("all-MiniLM-L6-v2") / "tokenizer.json", path / "tokenizer.json")
    state = tiny_state() if state is None else state
    if bin_file:
        torch.save(state, path / "pytorch_model.bin")
    else:
        save_file({k: v.contiguous() for k, v in state.items()}, str(path / "model.safetensors"))
    if st_files:
        (path / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
        (path / "1_Pooling").mkdir(exist_ok=True)
        (path / "1_Pooling" / "config.json").write_text(json.dumps(
            pooling or {"word_embedding_dimension": 8, "pooling_mode_mean_tokens": True}))
        (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_folder(tmp_path_factory.mktemp("tiny"))


def test_tiny_matches_hf_bert(tiny):
    transformers = pytest.importorskip("transformers")
    ours = load_pretrained(tiny)
    hf = transformers.BertModel.from_pretrained(str(tiny), attn_implementation="eager").eval()
    ids, lengths = ours._batch(ours.tokenize(["hello there, world", "a b"]))
    attn = (torch.arange(ids.shape[1])[None] < lengths[:, None]).long()
    types = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0, 0]])[:, : ids.shape[1]]
    with torch.inference_mode():
        ref = hf(input_ids=ids, attention_mask=attn, token_type_ids=types, output_hidden_states=True,
                 output_attentions=True)
        got = ours.model(ids, lengths=lengths, token_type_ids=types, output_hidden_states=True, need_weights=True)
    keep = attn.bool()
    for a, b in zip(got.hidden_states, ref.hidden_states):
        torch.testing.assert_close(a[keep], b[keep], atol=1e-5, rtol=0)
    for a, b in zip(got.attentions, ref.attentions):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    torch.testing.assert_close(got.pooler_output, ref.pooler_output, atol=1e-5, rtol=0)
    # encode = mean over real tokens of the last layer, then L2 norm
    emb = ours.encode(["hello there, world", "a b"])
    with torch.inference_mode():
        ref = hf(input_ids=ids, attention_mask=attn)  # token types 0, as encode uses
    want = (ref.last_hidden_state * attn[..., None]).sum(1) / attn.sum(1, keepdim=True)
    torch.testing.assert_close(emb, torch.nn.functional.normalize(want, dim=1), atol=1e-5, rtol=0)


def test_pytorch_model_bin_and_bert_prefix(tiny, tmp_path):
    state = {("bert." + k): v for k, v in tiny_state().items()}
    state["cls.predictions.bias"] = torch.zeros(30522)  # an MLM head: ignored
    folder = make_folder(tmp_path / "bin", state=state, bin_file=True)
    a, b = load_pretrained(folder), load_pretrained(tiny)
    assert folder.joinpath("pytorch_model.bin").is_file() and not folder.joinpath("model.safetensors").exists()
    torch.testing.assert_close(a.encode(["same weights"]), b.encode(["same weights"]), atol=0, rtol=0)


def test_no_pooler_checkpoint(tmp_path):
    ours = load_pretrained(make_folder(tmp_path / "np", state=tiny_state(pooler=False)))
    assert ours.model.pooler is None and ours.encode(["x"]).shape == (1, 8)


@pytest.mark.parametrize("modes,dim", [(("cls",), 8), (("max",), 8), (("mean_sqrt_len",), 8),
                                       (("cls", "mean"), 16)])
def test_pooling_modes(tmp_path, modes, dim):
    keys = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens", "mean": "pooling_mode_mean_tokens",
            "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens"}
    ours = load_pretrained(make_folder(tmp_path / "p", pooling={keys[m]: True for m in modes}))
    texts = ["one two three four", "five"]
    emb = ours.encode(texts, normalize=False)
    ids, lengths = ours._batch(ours.tokenize(texts))
    with torch.no_grad():
        h = ours.model(ids, lengths=lengths).last_hidden_state  # (2, L, 8)
    n = int(lengths[1])
    row = {"cls": h[1, 0], "max": h[1, :n].amax(0), "mean": h[1, :n].mean(0),
           "mean_sqrt_len": h[1, :n].sum(0) / n ** 0.5}
    assert emb.shape == (2, dim)
    torch.testing.assert_close(emb[1], torch.cat([row[m] for m in modes]), atol=1e-5, rtol=0)


def test_truncation_warns_and_limits(tiny, tmp_path):
    ours = load_pretrained(tiny)
    assert ours.max_seq_length == 16  # sentence_bert_config.json
    with pytest.warns(UserWarning, match="truncated to 16 tokens"):
        long = ours.encode(["word " * 40, "short"])
    assert long.shape == (2, 8)
    plain = load_pretrained(make_folder(tmp_path / "plain", st_files=False))
    assert plain.max_seq_length == 24 and plain.pooling.modes == ("mean",) and not plain.pooling.normalize
    with pytest.warns(UserWarning, match="truncated to 24 tokens"):
        plain.encode(["word " * 100])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain.encode(["word " * 22])  # 22 + [CLS] + [SEP] = 24: fits


def test_empty_and_bad_texts(tiny):
    ours = load_pretrained(tiny)
    empty = ours.encode([])
    assert empty.shape == (0, 8) and empty.dtype == torch.float32
    assert ours.encode("one text").shape == (1, 8)
    with pytest.raises(ValueError, match="text 1 must be a str"):
        ours.encode(["ok", 3])
    with pytest.raises(ValueError, match="batch_size"):
        ours.encode(["ok"], batch_size=0)


def test_missing_files(tmp_path, tiny):
    with pytest.raises(FileNotFoundError, match="no model folder at"):
        load_pretrained(tmp_path / "nowhere")
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        broken = tmp_path / name.replace(".", "_")
        shutil.copytree(tiny, broken)
        (broken / name).unlink()
        with pytest.raises(FileNotFoundError, match=name.replace(".", r"\.")):
            load_pretrained(broken)


def test_unknown_architecture(tmp_path):
    folder = make_folder(tmp_path / "gpt", config={**HF_CONFIG, "model_type": "gpt2"})
    with pytest.raises(ValueError, match=r"config\.json: unknown architecture: model_type 'gpt2'"):
        load_pretrained(folder)


def test_missing_and_unexpected_weights_are_listed(tmp_path):
    state = tiny_state()
    del state["encoder.layer.1.attention.self.key.weight"], state["embeddings.LayerNorm.bias"]
    state["encoder.layer.7.output.dense.weight"] = torch.zeros(8, 16)
    with pytest.raises(ValueError) as e:
        load_pretrained(make_folder(tmp_path / "m", state=state))
    msg = str(e.value)
    assert "model.safetensors" in msg
    assert "missing weights ['embeddings.LayerNorm.bias', 'encoder.layer.1.attention.self.key.weight']" in msg
    assert "unexpected weights ['encoder.layer.7.output.dense.weight']" in msg


def test_shape_mismatch_is_listed(tmp_path):
    folder = make_folder(tmp_path / "s", config={**HF_CONFIG, "intermediate_size": 32})
    with pytest.raises(ValueError, match=r"shape mismatch .*encoder\.layer\.0\.intermediate\.dense\.weight: "
                                         r"checkpoint \(16, 8\), config \(32, 8\)"):
        load_pretrained(folder)


def test_bad_json_and_modules(tmp_path, tiny):
    bad = shutil.copytree(tiny, tmp_path / "bad")
    (bad / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"config\.json: not valid JSON"):
        load_pretrained(bad)
    odd = shutil.copytree(tiny, tmp_path / "odd")
    (odd / "modules.json").write_text(json.dumps([{"type": "sentence_transformers.models.Dense", "path": "2"}]))
    with pytest.raises(ValueError, match="unsupported sentence-transformers modules"):
        load_pretrained(odd)


def test_builtin_registry():
    folder = read_folder(builtin_path("all-MiniLM-L6-v2"))
    assert folder.max_seq_length == 256 and folder.pooling.modes == ("mean",) and folder.pooling.normalize
    assert resolve("sentence-transformers/all-MiniLM-L6-v2")[0] == "all-MiniLM-L6-v2"
    with pytest.raises(FileNotFoundError, match="built-in: \\['all-MiniLM-L6-v2'\\]"):
        resolve("no-such-model")


def test_import_attnkit_stays_light():
    code = "import attnkit, sys; print('attnkit.pretrained' in sys.modules, 'tokenizers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    from attnkit.load import load_pretrained as dispatcher  # runs, Marian folders, then BERT-family encoders

    assert attnkit.load_pretrained is dispatcher
