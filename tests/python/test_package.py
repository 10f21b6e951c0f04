"""The installed package: version, build features, exception classes, the CLI entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest

import strata


def test_version_and_features() -> None:
    info = strata.build_info()
    assert info["version"] == strata.__version__
    assert "scalar" in info["features"]
    assert info["active_isa"] in info["supported_isas"]
    assert int(info["threads"]) >= 1
    # The IQ2 / IQ3 VBMI kernels need the avx512 path (and a CPU with VBMI).
    assert isinstance(info["avx512_vbmi"], bool)
    if info["avx512_vbmi"]:
        assert "avx512" in info["supported_isas"]


def test_exception_hierarchy() -> None:
    assert issubclass(strata.FormatError, strata.StrataError)
    assert issubclass(strata.ConfigError, ValueError)
    assert issubclass(strata.IOFailure, OSError)
    with pytest.raises(strata.InvalidArgument, match="unknown ISA"):
        strata._strata.force_isa("sse9")


def test_cli_version() -> None:
    out = subprocess.run([sys.executable, "-m", "strata.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.startswith(f"strata {strata.__version__}")
