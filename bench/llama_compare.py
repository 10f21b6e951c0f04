"""strata vs llama.cpp (llama-cpp-python) on the same qwen3moe GGUF: logit agreement and prefill/decode
tok/s side by side, same threads. The code is strata.bench.llama_compare (also `strata bench llama`).

    PYTHONPATH=python python3 bench/llama_compare.py [--models tiny:F32,small:Q8_0] [--threads 1,2]
        [--repeats 3] [--prompt 128] [--decode 32] [--model FILE.gguf] [--markdown] [--json OUT.json]

Random models are built once into --workdir (default $TMPDIR/strata-llama-bench) and reused.
See docs/benchmarks.md.
"""

from __future__ import annotations

import sys

from strata.bench.llama_compare import main

if __name__ == "__main__":
    sys.exit(main())
