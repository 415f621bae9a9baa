"""attnkit.nn.limits: ranges of numbers (the API and the command line from one place) and available memory."""

import argparse
import math
from dataclasses import dataclass, field

import pytest

from attnkit.nn import TransformerConfig
from attnkit.nn.limits import SEED, Range, available_memory, check_fields, check_memory, floats, ints


def test_an_integer_range_parses_and_checks():
    r = ints(1, 65536)
    assert r.text() == "an integer in [1, 65536]"
    assert r("512") == 512 and r("65536") == 65536 and r(" 7 ") == 7
    for bad in ("0", "65537", "1e9", "1.5", "x", "", "nan", str(2**70)):
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be an integer in \[1, 65536\], got "):
            r(bad)
    assert not r.contains(True) and not r.contains(2.0) and r.contains(3)
    assert r.check(3, "x") == 3
    with pytest.raises(ValueError, match=r"^`d` must be an integer in \[1, 65536\], got 1000000$"):
        r.check(10**6, "`d`")


def test_a_float_range_refuses_nan_and_inf_and_its_open_ends():
    r = floats(0, 1, open_high=True)
    assert r.span() == "[0, 1)" and r("0") == 0.0 and r("0.5") == 0.5
    for bad in ("1", "nan", "inf", "-inf", "-0.1", "1e400", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be a number in \[0, 1\)"):
            r(bad)
    assert not r.contains(math.nan) and not r.contains(math.inf) and r.contains(0)
    assert floats(1e-4, 1e4).span() == "[0.0001, 10000]" and floats(0, 10, open_low=True).span() == "(0, 10]"


def test_seed_is_what_every_generator_takes():
    assert SEED.text() == "an integer in [0, 9223372036854775807]"
    with pytest.raises(argparse.ArgumentTypeError, match="got '1180591620717411303424'"):
        SEED(str(2**70))


@dataclass(frozen=True)
class _Cfg:
    n: int = field(default=1, metadata={"range": ints(1, 8)})
    p: float | None = field(default=None, metadata={"range": floats(0, 1)})
    free: int = 5

    def __post_init__(self):
        check_fields(self)


def test_check_fields_uses_each_fields_range_and_lets_a_none_default_be_none():
    assert _Cfg(n=8, p=None, free=-(10**9)).n == 8
    with pytest.raises(ValueError, match=r"^_Cfg: `n` must be an integer in \[1, 8\], got 9$"):
        _Cfg(n=9)
    with pytest.raises(ValueError, match=r"^_Cfg: `p` must be a number in \[0, 1\], got nan$"):
        _Cfg(p=math.nan)


@pytest.mark.parametrize("changes,words", [
    ({"d_model": 1_000_000}, "`d_model` must be an integer in [1, 65536], got 1000000"),
    ({"num_heads": 2048, "d_model": 4096}, "`num_heads` must be an integer in [1, 1024]"),
    ({"num_encoder_layers": 10**6}, "`num_encoder_layers` must be an integer in [0, 1024]"),
    ({"max_len": 10**9}, "`max_len` must be an integer in [1, 1048576]"),
    ({"dropout": math.nan}, "`dropout` must be a number in [0, 1), got nan"),
    ({"layer_norm_eps": math.inf}, "`layer_norm_eps` must be a number in (0, 1], got inf"),
    ({"d_ff": 2.0}, "`d_ff` must be an integer"),
])
def test_transformer_config_refuses_sizes_outside_their_range(changes, words):
    with pytest.raises(ValueError) as e:
        TransformerConfig(**changes)
    assert str(e.value).startswith(f"TransformerConfig: {words}")


def test_available_memory_reads_meminfo_and_a_cgroup_limit(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n")
    nothing = tmp_path / "no-cgroup"
    assert available_memory(meminfo, nothing) == 20000000 * 1024
    cg = tmp_path / "cg"
    cg.mkdir()
    (cg / "memory.max").write_text(str(8 * 2**30) + "\n")
    (cg / "memory.current").write_text(str(2 * 2**30) + "\n")
    assert available_memory(meminfo, cg) == 6 * 2**30  # the cgroup's headroom is lower
    (cg / "memory.max").write_text("max\n")
    assert available_memory(meminfo, cg) == 20000000 * 1024
    have = available_memory()  # this machine: a real, positive number
    assert have is None or have > 0


def test_check_memory_says_what_needs_how_much_in_one_line():
    check_memory(2**30, "small work", available=2**31)
    with pytest.raises(ValueError) as e:
        check_memory(3 * 2**40, "train translate: this run", available=20 * 2**30)
    assert str(e.value) == ("train translate: this run needs about 3072.0 GB of memory (an estimate), more than the "
                            "20.0 GB this machine has available")


def test_a_range_is_an_argparse_type():
    p = argparse.ArgumentParser(prog="x", exit_on_error=False)
    p.add_argument("--n", type=Range(int, 1, 4))
    assert p.parse_args(["--n", "4"]).n == 4
    with pytest.raises(argparse.ArgumentError, match=r"argument --n: must be an integer in \[1, 4\], got '5'"):
        p.parse_args(["--n", "5"])
