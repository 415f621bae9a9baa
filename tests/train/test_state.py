"""The trainer state's pickle-free encoding, the RNG states per device, and autocast per device."""

import json
import random

import numpy as np
import pytest
import torch

from attnkit.train import state as st
from attnkit.train.evaluation import autocast
from attnkit.train.schedule import make_scheduler


def _optimizer_after_steps(n=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    opt = torch.optim.AdamW([{"params": model[0].parameters(), "weight_decay": 0.1},
                             {"params": model[1].parameters(), "weight_decay": 0.0}], lr=1e-2)
    sched = make_scheduler(opt, "cosine", 2, 10)
    for _ in range(n):
        opt.zero_grad()
        model(torch.randn(5, 3)).square().sum().backward()
        opt.step()
        sched.step()
    return model, opt, sched


def _same(a, b):
    """Equal structure, types and values; tensors bitwise with the same dtype."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b or (a != a and b != b)


def test_optimizer_scheduler_and_rng_round_trip_through_json_and_tensors():
    _, opt, sched = _optimizer_after_steps()
    obj = {"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "rng": st.rng_state(torch.device("cpu")),
           "odd": {1: (2.5, None, float("inf")), "__tensor__": "not a tag", "x": [True, "s"]}}
    doc, tensors = st.encode(obj)
    text = json.dumps(doc)  # plain JSON: nothing but values
    assert "exp_avg" in text and all(isinstance(t, torch.Tensor) for t in tensors.values())
    back = st.decode(json.loads(text), tensors)
    _same(back, obj)
    assert isinstance(back["optimizer"]["state"], dict) and 0 in back["optimizer"]["state"]
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)  # a tuple stays a tuple
    _same(st.from_bytes(st.to_bytes(obj)), obj)


def test_loaded_state_continues_bitwise():
    model, opt, sched = _optimizer_after_steps(3)
    doc, tensors = st.encode({"optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                              "model": model.state_dict()})
    back = st.decode(json.loads(json.dumps(doc)), tensors)
    model2, opt2, sched2 = _optimizer_after_steps(0)
    model2.load_state_dict(back["model"])
    opt2.load_state_dict(back["optimizer"])
    sched2.load_state_dict(back["scheduler"])
    x = torch.randn(5, 3)
    for m, o, s in ((model, opt, sched), (model2, opt2, sched2)):
        o.zero_grad()
        m(x).square().sum().backward()
        o.step()
        s.step()
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)
    assert sched.get_last_lr() == sched2.get_last_lr()


def test_encode_refuses_objects_that_would_need_pickle():
    with pytest.raises(TypeError, match="cannot store object at /a"):
        st.encode({"a": object()})
    with pytest.raises(ValueError, match="not in the tensor file"):
        st.decode({"__tensor__": "missing"}, {})


def test_rng_state_restores_python_numpy_and_torch():
    st.seed_everything(5)
    saved = st.rng_state(torch.device("cpu"))
    first = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.random(), np.random.rand(), torch.rand(3)  # move on
    notes = st.set_rng_state(st.from_bytes(st.to_bytes(saved)), torch.device("cpu"))
    assert notes == [] and (random.random(), float(np.random.rand()), float(torch.rand(()))) == first
    assert set(saved) == {"torch", "python", "numpy"}  # on the CPU, no accelerator generator


def test_rng_state_of_an_accelerator_only_when_the_model_runs_there(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "get_rng_state",
                        lambda d: calls.append(("get", d)) or torch.arange(4, dtype=torch.uint8))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, d: calls.append(("set", d, s.tolist())))
    cuda = torch.device("cuda", 1)
    saved = st.rng_state(cuda)
    assert set(saved) == {"torch", "python", "numpy", "cuda"} and calls == [("get", cuda)]
    assert st.set_rng_state(saved, cuda) == [] and calls[-1] == ("set", cuda, [0, 1, 2, 3])
    notes = st.set_rng_state(saved, torch.device("cpu"))  # a cuda run resumed on the CPU: said, not hidden
    assert len(notes) == 1 and "cuda generator state is not used on cpu" in notes[0]
    assert "no cuda generator state" in st.set_rng_state(st.rng_state(torch.device("cpu")), cuda)[0]


@pytest.mark.filterwarnings("ignore:CUDA is not available")
@pytest.mark.parametrize("device", ["cpu", "cuda", "mps"])
def test_autocast_follows_the_model_device(device):
    ctx = autocast(torch.device(device), bf16=True)
    assert isinstance(ctx, torch.autocast) and ctx.device == device and ctx.fast_dtype == torch.bfloat16
    assert not isinstance(autocast(torch.device(device), bf16=False), torch.autocast)


def test_autocast_on_a_device_without_it_falls_back_to_float32_and_says_so():
    with pytest.warns(UserWarning, match="autocast is not available on meta"):
        ctx = autocast(torch.device("meta"), bf16=True)
    assert not isinstance(ctx, torch.autocast)
