"""The fuzz of the files attnkit reads, run in a child process whose address space is capped.

``python -m tests.train.file_fuzz FOLDER TEXT`` copies FOLDER (a run of ``attnkit train translate`` or a Marian
folder) once per mutation, applies the mutation to one file, loads the copy with ``attnkit.load_pretrained`` and
translates TEXT with it; it prints one JSON line per mutation: the file, what changed, the outcome ("ok" or the
exception's type and message) and the seconds it took. The parent (the tests) asserts that every outcome is
"ok" or a one-line ValueError. ``resource.RLIMIT_AS`` caps the child at what it uses after its imports plus
``HEADROOM`` bytes, so a mutation that makes attnkit allocate GBs is a MemoryError there, not a swapping machine.

Mutations: every value of a JSON file (nested keys and the first item of each list) replaced by a few of
``VALUES`` (sizes, NaN, inf, negative, huge, wrong types, deep nesting), and whole files replaced by ``WHOLE``.
A file covered by a checksum (``bpe.json``, ``model.safetensors``) gets its new checksum written into meta.json
(as whoever edits a run can do); a safetensors file is mutated in its header only.
"""

from __future__ import annotations

import json
import math
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path

HEADROOM = 2 << 30
SECONDS = 20  # a case still running after this long is reported as "timeout"
DEEP = "[" * 200_000 + "]" * 200_000
VALUES = [math.nan, math.inf, -math.inf, -1, 0, 1, 3, 10**9, 10**18, 2**70, -(2**40), 1.5, 1e300, "x", "", [], {},
          None, True, [[1e9]], [[-3]], {"a": [1, [2, [3]]]}, "/dev/zero", "../../etc/passwd",
          json.loads("[" * 60 + "]" * 60)]
WHOLE = ["", "null", "[]", "5", '"x"', "{", DEEP, "{}", "\ufeff{}", '{"a": 1}' * 3]


def leaves(doc, keys=()):
    """Key paths of every value in ``doc`` (dict keys; the first item of a list)."""
    if keys:
        yield keys
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaves(v, (*keys, k))
    elif isinstance(doc, list) and doc:
        yield from leaves(doc[0], (*keys, 0))


def put(doc, keys, value):
    d = doc
    for k in keys[:-1]:
        d = d[k]
    d[keys[-1]] = value


def _safetensors_header(path: Path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _write_safetensors(path: Path, header, data: bytes) -> None:
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)


def _reseal(root: Path, path: Path) -> None:
    """Write the new sha256 of ``bpe.json`` or ``model.safetensors`` into the run's meta.json (Marian folders list
    none)."""
    from attnkit.train.checkpoint import sha256

    if path.name not in ("bpe.json", "model.safetensors"):
        return
    for meta_path in root.rglob("meta.json"):
        meta = json.loads(meta_path.read_text())
        if path.name == "bpe.json":
            meta["subwords_sha256"] = sha256(path)
        elif path.parent == meta_path.parent:
            meta["files"][path.name] = sha256(path)
        meta_path.write_text(json.dumps(meta))


def cases(folder: Path, names: list[str]):
    """(file, description, mutate(copy_root)) for every mutation of the module doc. ``names``: "file:N:K": at most
    N values of the file (spread evenly over it; 0: all of them) each replaced by K of ``VALUES``."""
    for spec in names:
        name, cap, per_leaf = spec.split(":")
        per_leaf = int(per_leaf)
        path = folder / name
        is_st = name.endswith(".safetensors")
        doc = _safetensors_header(path)[0] if is_st else json.loads(path.read_text())
        keys = list(leaves(doc))
        if int(cap) and len(keys) > int(cap):
            keys = [keys[round(i * (len(keys) - 1) / (int(cap) - 1))] for i in range(int(cap))]
        for i, k in enumerate(keys):
            for j in range(per_leaf):
                value = VALUES[(i * per_leaf + j) % len(VALUES)]
                yield name, f"{list(k)} = {json.dumps(value)[:40]}", _set(name, k, value, is_st)
        if not is_st:
            for text in WHOLE:
                yield name, f"whole file = {text[:20]!r}", _whole(name, text)


def _set(name, keys, value, is_st):
    def mutate(root: Path):
        path = root / name
        if is_st:
            header, data = _safetensors_header(path)
            put(header, keys, value)
            _write_safetensors(path, header, data)
        else:
            doc = json.loads(path.read_text())
            put(doc, keys, value)
            path.write_text(json.dumps(doc))
        _reseal(root, path)
    return mutate


def _whole(name, text):
    def mutate(root: Path):
        (root / name).write_text(text)
        _reseal(root, root / name)
    return mutate


def run_case(folder: Path, text: str, mutate, which: dict) -> tuple[str, str]:
    import attnkit

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "f"
        shutil.copytree(folder, root)
        mutate(root)
        try:
            attnkit.load_pretrained(root, **which).translate([text], max_new_tokens=3)
        except BaseException as e:  # noqa: BLE001 - every outcome is reported to the parent
            return type(e).__name__, str(e).replace(tmp, "TMP")
    return "ok", ""


def _timeout(signum, frame):
    raise TimeoutError(f"still running after {SECONDS} s")


def main(folder: str, text: str, names: str) -> None:
    import torch

    import attnkit  # noqa: F401 - imported before the cap is measured
    from attnkit.pretrained import marian  # noqa: F401

    torch.set_num_threads(1)
    used = int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmSize:"))) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (used + HEADROOM, used + HEADROOM))
    signal.signal(signal.SIGALRM, _timeout)
    run_case(Path(folder), text, lambda root: None, {})  # the first load imports and warms up: not timed
    for name, what, mutate in cases(Path(folder), names.split(",")):
        start = time.perf_counter()
        signal.alarm(SECONDS)
        try:
            kind, msg = run_case(Path(folder), text, mutate, {"which": "latest"} if name == "latest.json" else {})
        finally:
            signal.alarm(0)
        print(json.dumps({"file": name, "what": what, "kind": kind, "msg": msg[:2000],
                          "seconds": round(time.perf_counter() - start, 3)}), flush=True)


def fuzz(folder: Path, text: str, names: list[str]) -> list[dict]:
    """Run the child on ``folder`` (``names`` as ``cases`` takes them); its results, one dict per mutation."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "tests.train.file_fuzz", str(folder), text, ",".join(names)],
                          capture_output=True, text=True, cwd=root, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def problems(results: list[dict], seconds: float = 5.0) -> list[str]:
    """The results that are neither "ok" nor a one-line ValueError (CheckpointError is one) within ``seconds``."""
    allowed = {"ValueError", "CheckpointError", "FileNotFoundError"}
    return [f"{r['file']} {r['what']}: {r['kind']}: {r['msg'][:300]} ({r['seconds']} s)" for r in results
            if (r["kind"] != "ok" and (r["kind"] not in allowed or "\n" in r["msg"] or not r["msg"]))
            or r["seconds"] > seconds]


if __name__ == "__main__":
    main(*sys.argv[1:])
