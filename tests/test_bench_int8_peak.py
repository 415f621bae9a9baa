"""bench/int8_peak.py: the int8 multiply-add rates of this CPU, and the bound table int8_embed.py prints."""

import platform
import shutil

import pytest


@pytest.fixture(scope="module")
def int8_peak(bench_script):
    return bench_script("int8_peak")


def test_bound_lines_divide_the_products_by_each_rate(int8_peak):
    lines = int8_peak.bound_lines(2e12, {"sign trick": 100.0, "vnni": 400.0}, 30.0, "ORT int8")
    assert lines[0] == "| way | GMAC/s | least time for the products, s | highest possible x ORT int8 |"
    assert lines[2].endswith("| 100.0 | 20.000 | 1.50 |")  # 2e12 / 100e9 s; 30 s / 20 s
    assert lines[3].endswith("| 400.0 | 5.000 | 6.00 |")
    assert len(int8_peak.bound_lines(1e9, {"int16": 1.0}, None, "")[0].split("|")) == 5  # no peer column


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or shutil.which("cc") is None,
                    reason="needs x86-64 and a C compiler")
def test_the_probe_measures_fewer_instructions_as_faster(int8_peak):
    if "avx2" not in int8_peak.cpu_flags():
        pytest.skip("this CPU has no AVX2")
    rates = int8_peak.int8_rates(threads=1, rounds=3)
    assert set(rates) >= {"sign trick", "u8 x s8", "int16"}
    assert ("vnni" in rates) == ("avx512_vnni" in int8_peak.cpu_flags())
    assert all(1.0 < r < 1e5 for r in rates.values())  # GMAC/s of one core: above 1, below any CPU's
    # the same 32 products with one instruction fewer (the sign) cannot be slower on any x86 core
    assert rates["u8 x s8"] > rates["sign trick"]
