"""The bounded readers of the files attnkit is given: JSON (size, depth, kind of file) and a safetensors header
(every shape backed by the file's bytes)."""

import json
import os
import struct

import pytest
import torch

from attnkit.data.jsonfile import MAX_DEPTH, depth, read_json, regular_file
from attnkit.data.safetensors_header import TensorInfo, read_header


def test_read_json_reads_json(tmp_path):
    p = tmp_path / "a.json"
    p.write_text(json.dumps({"a": '[[[{"', "b": [[1, {"c": None}]], "n": float("nan")}))
    doc = read_json(p)
    assert doc["a"] == '[[[{"' and doc["b"] == [[1, {"c": None}]] and doc["n"] != doc["n"]
    assert depth(p.read_text()) == 4  # { [ [ {, the brackets inside the string not counted
    q = tmp_path / "link.json"
    q.symlink_to(p)  # a link to a file is followed (Hugging Face's cache is made of them)
    assert read_json(q)["b"] == [[1, {"c": None}]]


@pytest.mark.parametrize("text,words", [
    ("[" * 200_000 + "]" * 200_000, ["nested 200000 deep", f"at most {MAX_DEPTH} levels"]),
    ('{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1), [f"nested {MAX_DEPTH + 1} deep"]),
    ("{", ["not valid JSON"]),
    ("1" * 5000, ["not valid JSON", "digits"]),
    ('"\\ud800', ["not valid JSON"]),
])
def test_bad_json_is_one_line_naming_the_file(tmp_path, text, words):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(ValueError) as e:
        read_json(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{p}: ") and all(w in msg for w in words), msg


def test_files_that_are_not_regular_or_too_large(tmp_path):
    with pytest.raises(ValueError, match="expected a file, got a folder"):
        read_json(tmp_path)
    with pytest.raises(ValueError, match="/dev/zero: expected a file, got a device"):
        read_json("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="expected a file, got a FIFO"):
        read_json(fifo)  # checked without opening it (opening a FIFO would wait for a writer)
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 100 + "0]")
    with pytest.raises(ValueError, match=r"203 bytes, more than the 100"):
        read_json(big, limit=100)
    (tmp_path / "bad").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8 at byte 0"):
        read_json(tmp_path / "bad")
    with pytest.raises(FileNotFoundError, match="file not found"):
        regular_file(tmp_path / "missing", 10)


def _safetensors(path, header: dict, data: bytes = b"") -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_safetensors_header_gives_names_dtypes_shapes(tmp_path):
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(3, 4), "b": torch.ones(2, dtype=torch.bfloat16)}, tmp_path / "w.safetensors",
              metadata={"k": "v"})
    h = read_header(tmp_path / "w.safetensors")
    assert h == {"a": TensorInfo("F32", (3, 4)), "b": TensorInfo("BF16", (2,))}
    assert h["a"].nbytes == 48 and h["a"].is_float


@pytest.mark.parametrize("header,data,words", [
    ({"w": {"dtype": "F32", "shape": [10**9, 10**9], "data_offsets": [0, 16]}}, 16, ["needs", "bytes"]),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 10**12]}}, 16, ["outside the file's 16 bytes"]),
    ({"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, 16, ["invalid shape"]),
    ({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 16]}}, 16, ["invalid shape"]),
    ({"w": {"dtype": "X", "shape": [4], "data_offsets": [0, 16]}}, 16, ["no known dtype"]),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
      "v": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, 16, ["share bytes"]),
    ([1, 2], 0, ["not a JSON object"]),
])
def test_safetensors_header_that_claims_more_than_the_file(tmp_path, header, data, words):
    p = tmp_path / "w.safetensors"
    _safetensors(p, header, b"\0" * data)
    with pytest.raises(ValueError) as e:
        read_header(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{p}: ") and all(w in msg for w in words), msg


def test_safetensors_header_length_past_the_file(tmp_path):
    p = tmp_path / "w.safetensors"
    p.write_bytes(struct.pack("<Q", 2**60) + b"{}")
    with pytest.raises(ValueError, match="header length 1152921504606846976, file size 10"):
        read_header(p)
    p.write_bytes(b"\1")
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        read_header(p)


def test_file_problem_tells_a_loop_of_links_from_a_missing_file(tmp_path):
    """Issue 65, item 4: a symlink loop read as "no such file" (``Path.exists`` is False for it)."""
    from attnkit.cli.options import read_lines
    from attnkit.data.jsonfile import file_problem
    from attnkit.data.sound import read_audio

    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "f.txt").write_text("x\n")
    assert file_problem(tmp_path / "a") == "a loop of symbolic links"
    assert file_problem(tmp_path / "dangling") == "a broken symbolic link"
    assert file_problem(tmp_path / "missing") == "no such file"
    assert file_problem(tmp_path) == "a folder" and file_problem(tmp_path / "f.txt") is None
    with pytest.raises(ValueError, match=f"^{tmp_path / 'a'} is a loop of symbolic links, not a sound file$"):
        read_audio(tmp_path / "a", 8000)
    with pytest.raises(ValueError, match=f"^{tmp_path / 'a'} is a loop of symbolic links, not a text file$"):
        read_lines(tmp_path / "a")
    with pytest.raises(ValueError, match=f"^{tmp_path} is a folder, not a text file$"):
        read_lines(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_lines(tmp_path / "missing")
