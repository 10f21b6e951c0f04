"""``python -m strata.cli inspect``: the report on a good file, one error line on a bad one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)  # conftest's PYTHONPATH reaches the strata under test
    return subprocess.run([sys.executable, "-m", "strata.cli", "inspect", *args],
                          capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "model.gguf"
    w = gguf.GGUFWriter(path, "strata")
    w.add_uint32("strata.block_count", 2)
    w.add_string("tokenizer.chat_template", "{% for m in messages %}" * 20)
    w.add_token_list([f"tok{i}" for i in range(1000)])
    w.add_array("strata.nested", [[1, 2], [3]])
    w.add_tensor("token_embd.weight", np.zeros((10, 8), dtype=np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones((8,), dtype=np.float32))
    w.add_tensor("blk.0.ffn_down.weight", np.zeros((2, 2 * 34), dtype=np.uint8),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_inspect_prints_header_metadata_and_tensor_table(model: Path) -> None:
    out = run_cli(str(model))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"file        {model}" in text
    assert "version     3" in text
    assert "tensors     3 (" in text
    # Long arrays and strings are abbreviated.
    assert '["tok0", "tok1", "tok2", "tok3", "tok4", "tok5", "tok6", "tok7", ...] (1000 items)' in text
    assert "(460 chars)" in text
    assert "[[1, 2], [3]]" in text
    lines = text.splitlines()
    row = next(ln for ln in lines if ln.strip().startswith("token_embd.weight"))
    assert row.split() == ["token_embd.weight", "F32", "[8,", "10]", "320", row.split()[-1]]
    row = next(ln for ln in lines if ln.strip().startswith("blk.0.ffn_down.weight"))
    assert row.split()[1:5] == ["Q8_0", "[64,", "2]", "136"]
    # Totals per type, largest first, then all.
    totals = lines[lines.index("totals by type:") + 1:]
    assert totals[1].split()[:4] == ["F32", "2", "88", "352"]
    assert totals[2].split()[:4] == ["Q8_0", "1", "128", "136"]
    assert totals[3].split()[:4] == ["all", "3", "216", "488"]
    assert out.stderr == ""


def test_inspect_no_tensors_and_max_items(model: Path) -> None:
    out = run_cli(str(model), "--no-tensors", "--max-items", "2")
    assert out.returncode == 0, out.stderr
    assert "token_embd.weight" not in out.stdout
    assert "totals by type:" in out.stdout
    assert '["tok0", "tok1", ...] (1000 items)' in out.stdout


def test_inspect_json(model: Path) -> None:
    out = run_cli(str(model), "--json", "--max-items", "0")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["version"] == 3 and r["alignment"] == 32 and r["tensor_count"] == 3
    tokens = r["metadata"]["tokenizer.ggml.tokens"]
    assert tokens["type"] == "array[string]" and tokens["length"] == 1000 and not tokens["truncated"]
    assert len(tokens["value"]) == 1000
    assert r["metadata"]["strata.block_count"] == {"type": "uint32", "value": 2}
    assert r["tensors"][0] == {"name": "token_embd.weight", "type": "F32", "shape": [8, 10],
                               "offset": r["data_offset"], "nbytes": 320}
    assert r["totals_by_type"]["Q8_0"] == {"tensors": 1, "elements": 128, "bytes": 136}


@pytest.mark.parametrize("problem", ["truncated", "bad_magic", "missing", "directory", "bad_tensor_type"])
def test_inspect_bad_file_is_one_error_line(model: Path, tmp_path: Path, problem: str) -> None:
    data = model.read_bytes()
    path = tmp_path / f"{problem}.gguf"
    expected = {
        "truncated": "cannot fit",
        "bad_magic": "not a GGUF file",
        "missing": "cannot open: No such file or directory",
        "directory": "not a regular file",
        "bad_tensor_type": "unknown ggml type id 4",
    }[problem]
    if problem == "truncated":
        path.write_bytes(data[: len(data) // 3])
    elif problem == "bad_magic":
        path.write_bytes(b"GGUX" + data[4:])
    elif problem == "directory":
        path.mkdir()
    elif problem == "bad_tensor_type":
        r = gguf.GGUFReader(model)
        t = r.tensors[0]
        at = t.field.offset + 8 + len(t.name) + 4 + 8 * len(t.shape)
        path.write_bytes(data[:at] + (4).to_bytes(4, "little") + data[at + 4:])
    out = run_cli(str(path))
    assert out.returncode == 1
    assert out.stdout == ""
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: {path}: ")
    assert expected in lines[0]
