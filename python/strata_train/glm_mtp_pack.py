"""Move trained glm4moe weights off the GPU machine in Q8_0 pieces, and rebuild a Hugging Face directory.

The device tool brings back at most 64 MiB per call (8 files of 16 MiB), less than the model
(~145 MiB in Q8_0), so the trainer writes its weights as one blob of Q8_0 blocks (int8 codes +
one float16 scale per 32, ``gguf.quants``' Q8_0 rule) and float32 small tensors, cut into pieces
that several calls bring back. ``unpack`` turns the pieces into a Hugging Face checkpoint directory
(config.json, float32 model.safetensors with per-expert tensors, the tokenizer files) that
``strata convert DIR OUT.gguf --outtype q8_0`` reads. The float32 values are exactly code · scale,
so converting them to Q8_0 again gives the same blocks: the round trip is lossless.

    python -m strata_train.glm_mtp_pack unpack PIECES_DIR HF_DIR --tokenizer .data/stdlib/tokenizer.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

INDEX = "pack_index.json"
PIECE = "piece{:02d}.bin"
PIECE_BYTES = 15 * 1024 * 1024 + 512 * 1024  # 15.5 MiB: four of them and the index fit one call
QK = 32


def is_quantized(name: str, shape: tuple[int, ...]) -> bool:
    """Matrices go as Q8_0; norms, biases and routers (the converter keeps those F32) as float32."""
    return len(shape) == 2 and shape[-1] % QK == 0 and not name.endswith("mlp.gate.weight")


def quantize_q8_0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """gguf.quants' Q8_0: d = max|x| / 127 per 32, codes round(x / d) half away from zero."""
    blocks = x.astype(np.float32).reshape(-1, QK)
    d = np.abs(blocks).max(axis=1, keepdims=True) / 127
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, 0, 1 / d)
    q = np.trunc(blocks * inv + np.copysign(0.5, blocks * inv)).astype(np.int8)
    return q.reshape(x.shape), d.astype(np.float16).reshape(x.shape[0], -1)


def hf_tensors(state: dict[str, np.ndarray], experts: int) -> Iterator[tuple[str, np.ndarray]]:
    """The trainer's state dict with stacked experts, as the per-expert names of a HF checkpoint."""
    for name, arr in state.items():
        if ".mlp.experts." in name:
            prefix, kind = name.rsplit(".", 1)  # kind: gate | up | down
            for e in range(experts):
                yield f"{prefix}.{e}.{kind}_proj.weight", arr[e]
        else:
            yield name, arr


def pack(state: dict[str, np.ndarray], experts: int, out: Path, meta: dict[str, Any]) -> list[str]:
    """Write the blob as pieces + the index into out; return the piece names."""
    out.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    blob = bytearray()
    for name, arr in hf_tensors(state, experts):
        shape = tuple(int(s) for s in arr.shape)
        if is_quantized(name, shape):
            q, d = quantize_q8_0(arr)
            entries.append({"name": name, "shape": shape, "kind": "q8_0", "offset": len(blob)})
            blob += q.tobytes() + d.tobytes()
        else:
            entries.append({"name": name, "shape": shape, "kind": "f32", "offset": len(blob)})
            blob += np.ascontiguousarray(arr, dtype=np.float32).tobytes()
    names = []
    for i in range(0, len(blob), PIECE_BYTES):
        names.append(PIECE.format(len(names)))
        (out / names[-1]).write_bytes(blob[i:i + PIECE_BYTES])
    (out / INDEX).write_text(json.dumps({**meta, "bytes": len(blob), "pieces": names, "tensors": entries}))
    return names


def read_blob(pieces_dir: Path) -> tuple[dict[str, Any], bytes]:
    index = json.loads((pieces_dir / INDEX).read_text())
    missing = [p for p in index["pieces"] if not (pieces_dir / p).is_file()]
    if missing:
        raise FileNotFoundError(f"{pieces_dir}: missing pieces {missing}")
    blob = b"".join((pieces_dir / p).read_bytes() for p in index["pieces"])
    if len(blob) != index["bytes"]:
        raise ValueError(f"{pieces_dir}: {len(blob)} bytes in the pieces, the index says {index['bytes']}")
    return index, blob


def unpacked_tensors(index: dict[str, Any], blob: bytes) -> Iterator[tuple[str, np.ndarray]]:
    for t in index["tensors"]:
        shape, off = tuple(t["shape"]), t["offset"]
        n = int(np.prod(shape))
        if t["kind"] == "q8_0":
            q = np.frombuffer(blob, np.int8, n, off).reshape(-1, QK)
            d = np.frombuffer(blob, np.float16, n // QK, off + n).astype(np.float32)
            yield t["name"], (q.astype(np.float32) * d[:, None]).reshape(shape)
        else:
            yield t["name"], np.frombuffer(blob, np.float32, n, off).reshape(shape)


def write_safetensors(path: Path, tensors: Sequence[tuple[str, np.ndarray]]) -> None:
    header: dict[str, Any] = {}
    off = 0
    for name, arr in tensors:
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + arr.nbytes]}
        off += arr.nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for _, arr in tensors:
            f.write(np.ascontiguousarray(arr, dtype=np.float32).tobytes())


def unpack(pieces_dir: Path, hf_dir: Path, tokenizer: Path) -> None:
    index, blob = read_blob(pieces_dir)
    hf_dir.mkdir(parents=True, exist_ok=True)
    write_safetensors(hf_dir / "model.safetensors", list(unpacked_tensors(index, blob)))
    (hf_dir / "config.json").write_text(json.dumps(index["hf_config"], indent=1))
    shutil.copyfile(tokenizer, hf_dir / "tokenizer.json")
    tok = json.loads(tokenizer.read_text())
    special = [a["content"] for a in tok.get("added_tokens", []) if a.get("special")]
    eos = index["hf_config"].get("eos_token_id")
    eos_text = next((a["content"] for a in tok.get("added_tokens", []) if a["id"] == eos), None)
    (hf_dir / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": eos_text, "bos_token": None, "add_bos_token": False,
         "additional_special_tokens": special},
        indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m strata_train.glm_mtp_pack",
                                description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("unpack", help="pieces -> Hugging Face directory")
    u.add_argument("pieces", type=Path)
    u.add_argument("hf_dir", type=Path)
    u.add_argument("--tokenizer", type=Path, required=True, help="the demo data's tokenizer.json")
    a = p.parse_args(argv)
    try:
        unpack(a.pieces, a.hf_dir, a.tokenizer)
    except (OSError, ValueError, KeyError) as e:
        print(f"glm_mtp_pack: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.hf_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
