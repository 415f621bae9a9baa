"""eSpeak NG through its library: found or a one-line error saying how to install it; each batch said by a fresh
process, so the same requests give the same samples."""

from __future__ import annotations

import time

import numpy as np
import pytest

from attnkit.data import espeak
from attnkit.data.espeak import EspeakNotFound, Say, find_engine, synthesise
from tests.markers import needs_espeak


def test_without_a_library_one_line_says_how_to_install_one(monkeypatch):
    monkeypatch.setattr(espeak, "_locate", lambda: (None, None, "system"))
    with pytest.raises(EspeakNotFound) as e:
        find_engine()
    text = str(e.value)
    assert "pip install 'attnkit[tts]'" in text and "apt install espeak-ng" in text and "\n" not in text
    assert isinstance(e.value, FileNotFoundError)  # the CLI prints it as one line
    monkeypatch.setattr(espeak, "_locate", lambda: ("/nowhere/libespeak-ng.so.1", None, "system"))
    with pytest.raises(EspeakNotFound, match="/nowhere/libespeak-ng.so.1"):
        find_engine()


@needs_espeak
def test_the_same_requests_give_the_same_samples():
    engine = find_engine()
    assert engine.version[:1].isdigit() and str(engine).startswith(f"eSpeak NG {engine.version} (")
    items = [Say("gmw/en-US+f3", "seven", 175, 50, 50), Say("gmw/en+m3", "two", 175, 50, 50)]
    rate, a = synthesise(items, engine)
    time.sleep(1.05)  # eSpeak NG's own seed is the clock's second: seeded per request, the samples do not follow it
    _, b = synthesise(items, engine)
    assert rate == 22050 and len(a) == 2 and all(x.dtype == np.int16 for x in a)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0][:len(a[1])], a[1][:len(a[0])])
    for x in a:  # speech: loud in its middle, 0.2-1 s long
        assert 0.2 * rate < len(x) < 1.0 * rate and np.abs(x).max() > 3000
    _, (slow, fast) = synthesise([Say("gmw/en-US+f3", "seven", 100, 50, 50), Say("gmw/en-US+f3", "seven", 300, 50, 50)],
                                 engine)
    assert len(slow) > 1.5 * len(fast)
    _, (low, high) = synthesise([Say("gmw/en-US", "zero", 175, 10, 50), Say("gmw/en-US", "zero", 175, 90, 50)],
                                engine)
    assert not np.array_equal(low[:len(high)], high[:len(low)])


@needs_espeak
def test_a_voice_that_is_not_there_is_one_line():
    with pytest.raises(ValueError, match=r"espeak: eSpeak NG .* failed: no voice 'gmw/en\+nobody'"):
        synthesise([Say("gmw/en+nobody", "one", 175, 50, 50)], find_engine())
