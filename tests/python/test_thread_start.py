"""A thread pool that cannot start all its threads is one strata error, never a hang (issue 15): the
reported case, ``ulimit -v`` small with ``STRATA_THREADS=1024``, through the API and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from strata.convert import make_random_strata

TINY = dict(vocab_size=300, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True, sink_count=2,
            sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3, rope_theta=10000.0,
            rope_dim=8, n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4,
            hc_sinkhorn_iters=3, hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")

# Imports everything first, then caps the address space 1 GiB above what the process already maps:
# 1024 default thread stacks (8 MiB each) cannot fit.
_LIMITED = textwrap.dedent("""
    import resource, sys
    {imports}
    def vm_size():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    cap = vm_size() + (1 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    {body}
""")


def _run(code: str, env_threads: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if env_threads is not None:
        env["STRATA_THREADS"] = env_threads
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(TINY, seed=3, path=tmp_path_factory.mktemp("threads") / "tiny.gguf")


def test_api_raises_a_strata_error(model_path: Path) -> None:
    code = _LIMITED.format(imports="import strata\nfrom strata import _strata", body=textwrap.dedent(f"""
        try:
            _strata.Engine({str(model_path)!r}, n_threads=1024)
        except strata.StrataError as exc:
            print("raised", type(exc).__name__, exc)
            sys.exit(0)
        print("no error")
        sys.exit(7)
    """))
    r = _run(code)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("raised IOFailure could not start worker thread"), r.stdout
    assert "of 1024" in r.stdout
    assert "Traceback" not in r.stderr


def test_cli_exits_1_with_one_error_line(model_path: Path) -> None:
    code = _LIMITED.format(imports="from strata.cli.__main__ import main", body=textwrap.dedent(f"""
        sys.exit(main(["generate", "--model", {str(model_path)!r}, "--max-tokens", "2", "hi"]))
    """))
    r = _run(code, env_threads="1024")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and "could not start worker thread" in lines[0], r.stderr
