"""eSpeak NG, the speech synthesiser behind ``attnkit.data.synthetic_voices``, through its C library (ctypes).

The library is, first found:

1. the ``espeakng-loader`` package's (``pip install 'attnkit[tts]'``: the library and its voices in a wheel, for
   Linux, macOS and Windows);
2. the system's, ``libespeak-ng`` (``apt install espeak-ng``, ``brew install espeak-ng``).

Without either, ``find_engine`` raises ``EspeakNotFound`` (a FileNotFoundError), one line saying how to install one.
Nothing here is a dependency of ``pip install attnkit``: only the synthetic voices need it.

eSpeak NG keeps state from one call to the next inside a process (its pitch flutter's phase, its noise generator), so
the same word said twice in one process comes out different. ``synthesise`` therefore says each batch of requests in a
fresh Python process of its own (this file run as a script, with nothing but the standard library), which loads the
library, says the requests in order and exits: a batch always gives the same samples, whatever was said before it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass

__all__ = ["Engine", "Say", "EspeakNotFound", "find_engine", "synthesise", "MISSING"]

MISSING = ("synthetic voices need eSpeak NG, which was not found: install it with pip install 'attnkit[tts]' "
           "(espeakng-loader), or apt install espeak-ng (brew install espeak-ng)")
SYNCHRONOUS = 2  # AUDIO_OUTPUT_SYNCHRONOUS: espeak_Synth returns when the callback has had every sample
DONT_EXIT = 0x8000  # espeakINITIALIZE_DONT_EXIT: an error is returned, never exit() from inside the library
CHARS_UTF8 = 1
POS_CHARACTER = 1
RATE, PITCH, RANGE = 1, 3, 4  # espeak_PARAMETER
TIMEOUT = 600.0  # seconds a batch may take (a word takes about a millisecond)


class EspeakNotFound(FileNotFoundError):
    """No eSpeak NG library here (``MISSING`` says how to install one)."""


@dataclass(frozen=True)
class Say:
    """One request: ``text`` in ``voice`` (``"gmw/en-US+f3"``: a language voice and a variant), ``rate`` in words per
    minute (80-450), ``pitch`` and ``range`` (intonation) 0-99 (50: the voice's own)."""

    voice: str
    text: str
    rate: int
    pitch: int
    range: int


@dataclass(frozen=True)
class Engine:
    """The library found: its file, its voices' folder (None: the library's own), where it came from, its version."""

    library: str
    data: str | None
    source: str  # "espeakng-loader" or "system"
    version: str

    def __str__(self) -> str:
        return f"eSpeak NG {self.version} ({self.source})"


def _locate() -> tuple[str | None, str | None, str]:
    try:
        import espeakng_loader

        return espeakng_loader.get_library_path(), espeakng_loader.get_data_path(), "espeakng-loader"
    except (ImportError, RuntimeError, OSError):
        return ctypes.util.find_library("espeak-ng"), None, "system"


def find_engine() -> Engine:
    """The eSpeak NG library to synthesise with and its version; ``EspeakNotFound`` when there is none."""
    library, data, source = _locate()
    if not library:
        raise EspeakNotFound(MISSING)
    try:
        lib = ctypes.CDLL(library)
    except OSError as e:
        raise EspeakNotFound(f"{MISSING} ({library}: {e})") from None
    lib.espeak_Info.restype = ctypes.c_char_p
    lib.espeak_Info.argtypes = [ctypes.c_void_p]
    version = (lib.espeak_Info(None) or b"?").decode("utf-8", "replace")
    return Engine(library, data, source, version)


def synthesise(items: list[Say], engine: Engine) -> tuple[int, list]:
    """(sample rate, [int16 samples (S_i,) of each request]): ``items`` said in order by a fresh process."""
    import numpy as np

    request = {"library": engine.library, "data": engine.data,
               "items": [[s.voice, s.text, s.rate, s.pitch, s.range] for s in items]}
    done = subprocess.run([sys.executable, "-I", __file__], input=json.dumps(request).encode(), capture_output=True,
                          timeout=TIMEOUT, check=False)
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit status {done.returncode}"]
        raise ValueError(f"espeak: {engine} failed: {why[-1]}")
    out = done.stdout
    end = out.index(b"\n")
    rate, at, waves = int(json.loads(out[:end])["rate"]), end + 1, []
    for _ in items:
        (n,) = struct.unpack_from("=I", out, at)
        waves.append(np.frombuffer(out, np.int16, count=n, offset=at + 4).copy())
        at += 4 + 2 * n
    return rate, waves


def _serve() -> int:
    """The worker: a request on stdin (JSON), a line ``{"rate": R}`` then each request's samples (a native-order
    uint32 count, then int16 samples: the reader is on the same machine) on stdout."""
    request = json.loads(sys.stdin.buffer.read())
    lib = ctypes.CDLL(request["library"])
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                 ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
    data = request["data"].encode() if request["data"] else None
    rate = lib.espeak_Initialize(SYNCHRONOUS, 0, data, DONT_EXIT)
    if rate <= 0:
        print(f"cannot initialise eSpeak NG with its data in {request['data'] or 'its default folder'}",
              file=sys.stderr)
        return 1
    home = ctypes.c_char_p()
    lib.espeak_Info.restype = ctypes.c_char_p
    lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    lib.espeak_Info(ctypes.byref(home))
    variants = os.path.join(os.fsdecode(home.value or b""), "voices", "!v")
    chunks: list[bytes] = []

    def heard(wav, n, events):
        if n > 0 and wav:
            chunks.append(ctypes.string_at(wav, 2 * n))
        return 0

    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)(heard)
    lib.espeak_SetSynthCallback(callback)
    # espeak_ng_SetRandSeed from 1.52; before it eSpeak NG drew from the C library's rand() (1.51: checked)
    if hasattr(lib, "espeak_ng_SetRandSeed"):
        seed, seed_type = lib.espeak_ng_SetRandSeed, ctypes.c_long
    else:
        seed, seed_type = ctypes.CDLL(None).srand, ctypes.c_uint
    seed.argtypes, seed.restype = [seed_type], None
    out = sys.stdout.buffer
    out.write(json.dumps({"rate": rate}).encode() + b"\n")
    for voice, text, words_per_minute, pitch, spread in request["items"]:
        variant = voice.partition("+")[2]  # eSpeak NG says an unknown variant in the voice's own timbre: refused here
        if lib.espeak_SetVoiceByName(voice.encode()) != 0 or variant and not os.path.isfile(
                os.path.join(variants, variant)):
            print(f"no voice {voice!r} in {os.path.dirname(variants)}", file=sys.stderr)
            return 1
        for parameter, value in ((RATE, words_per_minute), (PITCH, pitch), (RANGE, spread)):
            lib.espeak_SetParameter(parameter, int(value), 0)
        chunks.clear()
        # eSpeak NG seeds its random numbers (a voice's breath noise) from the clock: seeded here by the request
        # itself, the same request gives the same samples in any batch
        seed(zlib.crc32(json.dumps([voice, text, words_per_minute, pitch, spread]).encode()))
        text = text.encode() + b"\0"
        if lib.espeak_Synth(text, len(text), 0, POS_CHARACTER, 0, CHARS_UTF8, None, None) != 0:
            print(f"eSpeak NG could not say {text[:-1]!r} in {voice!r}", file=sys.stderr)
            return 1
        wave = b"".join(chunks)
        out.write(struct.pack("=I", len(wave) // 2) + wave)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
