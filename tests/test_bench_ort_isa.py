"""bench/_ort_isa.py: the xgetbv reads of a shared object found and capped at AVX, and an ONNX Runtime copy so capped
that still computes what the installed one does."""

import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or shutil.which("objdump") is None
                                or shutil.which("cc") is None, reason="needs x86-64, objdump and a C compiler")

XCR0_PROBE = textwrap.dedent("""
    #include <stdint.h>
    uint64_t xcr0(void) {  /* XCR0, as MLAS and cpuinfo read it */
      uint32_t lo, hi;
      __asm__ volatile("xor %%ecx, %%ecx\\n\\txgetbv" : "=a"(lo), "=d"(hi) : : "ecx");
      return ((uint64_t)hi << 32) | lo;
    }
    int filler(int x) { return x * 3 + 1; }
""")


@pytest.fixture(scope="module")
def ort_isa(bench_script):
    return bench_script("_ort_isa")


def build_probe(tmp_path: Path) -> Path:
    src, so = tmp_path / "probe.c", tmp_path / "probe.so"
    src.write_text(XCR0_PROBE)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return so


def test_the_xgetbv_of_a_library_is_found_and_patched_to_report_avx_only(ort_isa, tmp_path):
    import ctypes

    so = build_probe(tmp_path)
    offsets = ort_isa._xgetbv_offsets(so)
    data = so.read_bytes()
    assert len(offsets) == 1 and data[offsets[0]:offsets[0] + 3] == ort_isa.XGETBV
    assert data.count(ort_isa.XGETBV) >= 1
    before = ctypes.CDLL(str(so)).xcr0()
    assert before & 0x7 == 0x7  # the OS saves x87, SSE and AVX state on any host that runs this suite
    patched = tmp_path / "patched.so"
    patched.write_bytes(data[:offsets[0]] + ort_isa.XCR0_AVX2 + data[offsets[0] + 3:])
    lib = ctypes.CDLL(str(patched))
    lib.xcr0.restype = ctypes.c_uint64
    assert lib.xcr0() & 0xFFFFFFFF == 0x7  # AVX state only: no opmask, ZMM or AMX bits
    assert lib.filler(4) == 13  # the rest of the code untouched


def test_a_capped_onnx_runtime_computes_what_the_installed_one_does(ort_isa, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    bench = Path(__file__).resolve().parents[1] / "bench"
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(bench)!r})
        import _ort_isa
        if len(sys.argv) > 1:
            folder, n = _ort_isa.cap_avx2(Path(sys.argv[1]))
            sys.path.insert(0, str(folder))
            assert n >= 1, n
        import numpy as np
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
        assert (len(sys.argv) > 1) == ort.__file__.startswith(sys.argv[-1]), ort.__file__
        rng = np.random.default_rng(0)
        w = rng.standard_normal((48, 40)).astype(np.float32)
        g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 48])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 40])],
                              [helper.make_tensor("w", TensorProto.FLOAT, [48, 40], w.ravel())])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        x = rng.standard_normal((33, 48)).astype(np.float32)
        y = s.run(None, {{"x": x}})[0]
        print(float(np.abs(y - x @ w).max()))
    """)
    prog = tmp_path / "run.py"
    prog.write_text(script)
    as_installed = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True)
    capped = subprocess.run([sys.executable, str(prog), str(tmp_path / "capped")], capture_output=True, text=True)
    assert as_installed.returncode == 0, as_installed.stderr
    assert capped.returncode == 0, capped.stderr
    assert float(capped.stdout) < 1e-4 and float(as_installed.stdout) < 1e-4
    assert (tmp_path / "capped" / "onnxruntime").is_dir()


def test_capping_refuses_once_onnx_runtime_is_imported(ort_isa, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", object())
    with pytest.raises(RuntimeError, match="already imported"):
        ort_isa.cap_avx2(tmp_path)
