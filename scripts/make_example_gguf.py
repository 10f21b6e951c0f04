"""Write a small GGUF file with the `gguf` package, for trying `strata.cli inspect` on a fresh machine."""

from __future__ import annotations

import sys

import gguf
import numpy as np


def main(path: str) -> None:
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(path, "strata")
    writer.add_name("example")
    writer.add_uint32("strata.embedding_length", 64)
    writer.add_float32("strata.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_array("strata.example.array", [1, 2, 3])
    writer.add_tensor("token_embd.weight", rng.standard_normal((128, 64), dtype=np.float32))
    q8 = gguf.quants.quantize(rng.standard_normal((64, 64), dtype=np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.attn_q.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "example.gguf")
