"""The numbers decoding (``attnkit.generation``) takes, each with its range (``attnkit.nn.limits``): the
decoding functions check their arguments against them and the command line's decoding options take them as
types (read without importing torch)."""

from __future__ import annotations

from .limits import SEED, floats, ints

LENGTHS = ints(0, 65536)
GENERATE = {  # generate's numeric arguments: wide enough for any real use; NaN and inf never
    "max_new_tokens": LENGTHS, "min_new_tokens": LENGTHS, "num_beams": ints(1, 1024),
    "length_penalty": floats(-100, 100), "temperature": floats(1e-4, 1e4), "top_k": ints(0, 2**24),
    "top_p": floats(0, 1, open_low=True), "seed": SEED,
}
MASK_PREDICT = {"iterations": ints(1, 1024), "length_candidates": ints(1, 256)}
CTC_NAT = {"blank_penalty": floats(-100.0, 100.0)}
