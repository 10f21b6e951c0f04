"""The CPU settings (STRATA_ISA, STRATA_REPACK, ``Config.isa`` / ``Config.repack``), the ``--version``
line naming the kernel path, and repacked weights through the Python bindings: a repacked matrix
multiplies bitwise like the plain one on the scalar path, on every path this CPU runs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import strata
from strata import _strata, quant
from strata.config import Config, ConfigWarning


@pytest.fixture
def restore_cpu() -> Iterator[None]:
    isa = _strata.active_isa()
    yield
    _strata.force_isa(isa)


def test_config_fields_validate_and_round_trip() -> None:
    c = Config(isa="SCALAR", repack="1")  # type: ignore[arg-type]  # canonicalised to "on"
    assert (c.isa, c.repack) == ("scalar", "on")  # canonical
    assert c.to_env()["STRATA_ISA"] == "scalar" and c.to_env()["STRATA_REPACK"] == "on"
    assert Config.from_env(c.to_env(), strict=True) == c
    assert (Config().isa, Config().repack) == ("auto", "auto")
    with pytest.raises(strata.ConfigError, match="STRATA_ISA"):
        Config(isa="sse9")
    with pytest.raises(strata.ConfigError, match="STRATA_REPACK"):
        Config(repack="sometimes")  # type: ignore[arg-type]
    for isa in ("avx512", "avx2", "neon-i8mm", "neon-dotprod", "neon"):
        if isa not in _strata.supported_isas():
            with pytest.raises(strata.ConfigError, match="not available"):
                Config(isa=isa)


def test_a_bad_environment_value_warns_and_the_group_falls_back() -> None:
    with pytest.warns(ConfigWarning, match="STRATA_ISA"):
        c = Config.from_env({"STRATA_ISA": "avx9000", "STRATA_REPACK": "off"})
    assert (c.isa, c.repack) == ("auto", "auto")
    with pytest.raises(strata.ConfigError):
        Config.from_env({"STRATA_REPACK": "maybe"}, strict=True)


def test_apply_cpu_forces_the_path_and_repack_reaches_the_engine(restore_cpu: None) -> None:
    Config(isa="scalar").apply_cpu()
    assert _strata.active_isa() == "scalar"
    Config().apply_cpu()  # auto leaves the path as it is
    assert _strata.active_isa() == "scalar"
    assert Config(repack="off").native().as_dict()["cpu"]["repack"] == "off"


def test_version_names_the_active_path() -> None:
    for isa in _strata.supported_isas():
        out = subprocess.run([sys.executable, "-m", "strata.cli", "--version"], capture_output=True,
                             text=True, env={**_env(), "STRATA_ISA": isa})
        assert out.returncode == 0, out.stderr
        assert f"active: {isa};" in out.stdout


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}


# Block bytes and the offsets of the fp16 scales of the types strata has no quantizer for: random valid
# blocks are random bytes with small fp16 scales written in.
_RAW_BLOCKS = {
    "Q2_K": (84, (80, 82)),
    "Q3_K": (110, (108,)),
    "Q4_K": (144, (0, 2)),
    "Q6_K": (210, (208,)),
    "IQ4_XS": (136, (0,)),
    "IQ4_NL": (18, (0,)),
}


def _random_weights(plain: str, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """A rows x cols matrix in `plain`: quantized normals, or random valid K / IQ blocks."""
    if plain not in _RAW_BLOCKS:
        return quant.quantize(rng.standard_normal((rows, cols), dtype=np.float32), plain)
    size, halves = _RAW_BLOCKS[plain]
    nb = cols // quant.block_size(plain)
    raw = rng.integers(0, 256, size=(rows, nb, size), dtype=np.uint8)
    for o in halves:
        d = rng.uniform(2e-3, 2e-2, size=(rows, nb)).astype(np.float16)
        raw[:, :, o:o + 2] = d.view(np.uint8).reshape(rows, nb, 2)
    return raw.reshape(rows, nb * size)


def _check_repacked_gemv(plain: str, w: np.ndarray, x: np.ndarray) -> str:
    """The repacked gemv of w against x on every ISA path is bitwise the plain scalar gemv; the name."""
    rows, cols = w.shape[0], x.shape[1]
    _strata.force_isa("scalar")
    want = quant.gemv(w, plain, (rows, cols), x)
    packed, name = _strata.quant.repack(w, plain, rows, cols)
    assert name == plain + "_R16" and len(packed) == w.size
    for isa in _strata.supported_isas():
        _strata.force_isa(isa)
        got = quant.gemv(packed, name, (rows, cols), x)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (plain, isa)
    return name


@pytest.mark.parametrize("plain", ["Q4_0", "Q5_0", "Q8_0", "Q2_K", "Q3_K", "IQ4_XS", "IQ4_NL", "Q5_1"])
def test_repacked_gemv_is_bitwise_the_plain_scalar_gemv(plain: str, restore_cpu: None) -> None:
    rng = np.random.default_rng(3)
    rows, cols = 64, 256
    w = _random_weights(plain, rows, cols, rng)
    x = rng.standard_normal((3, cols), dtype=np.float32)
    _check_repacked_gemv(plain, w, x)
    with pytest.raises(strata.InvalidArgument, match="multiple of 16"):
        _strata.quant.repack(w[:24], plain, 24, cols)


# One activation row (the decode GEMV) and several (a verification window; 5 = a pass of 4 that
# prefetches, then one that does not), every repacked type.
_PREFETCH_SCRIPT = f"""
import sys
import numpy as np
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from test_cpu_settings import _check_repacked_gemv, _random_weights
rng = np.random.default_rng(5)
for plain in ("Q4_0", "Q5_0", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q6_K", "IQ4_XS", "IQ4_NL", "Q5_1"):
    w = _random_weights(plain, 48, 1024, rng)
    for acts in (1, 2, 5):
        _check_repacked_gemv(plain, w, rng.standard_normal((acts, 1024), dtype=np.float32))
print("ok")
"""


@pytest.mark.parametrize("distance", ["off", "64", "1024", "65536"])
def test_decode_gemv_prefetch_changes_no_bit(distance: str) -> None:
    """STRATA_PREFETCH (read once per process, hence a subprocess): the repacked GEMVs that prefetch
    ahead (one activation, and the first pass over each row group of several) give the plain scalar
    kernel's bits at any distance."""
    out = subprocess.run([sys.executable, "-c", _PREFETCH_SCRIPT], capture_output=True, text=True,
                         env={**_env(), "STRATA_PREFETCH": distance})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_bad_prefetch_value_is_named() -> None:
    with pytest.raises(strata.ConfigError, match="STRATA_PREFETCH"):
        Config.from_env({"STRATA_PREFETCH": "soon"}, strict=True)
    assert Config.from_env({"STRATA_PREFETCH": "2048"}, strict=True) == Config()
