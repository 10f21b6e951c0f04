"""The AMX kernels' memory effects, checked where no AMX runs (CI has none).

GCC 12's ``_tile_loadconfig`` declares only 8 of its 64 bytes as read and ``_tile_loadd`` no memory at all,
so the compiler may drop or move the stores that fill a tile configuration or a buffer a tile is loaded
from. It dropped the configuration's, and the tile kernels died with SIGILL on an AMX Xeon
(docs/quantization.md, "AMX tiles"). cpu/amx/tile_ops.h issues both instructions with the memory operands
the compiler must honour; this test keeps the two intrinsics out of the AMX sources, since the tile kernels
themselves can only be run on an AMX machine (tests/cpp/test_amx.cpp)."""

from __future__ import annotations

import re
from pathlib import Path

_AMX = Path(__file__).resolve().parents[2] / "cpp" / "strata" / "cpu" / "amx"


def _code(path: Path) -> str:
    """The file without its // comments (which name the intrinsics to say why they are avoided)."""
    return "\n".join(line.split("//", 1)[0] for line in path.read_text().splitlines())


def test_amx_sources_load_tiles_through_tile_ops() -> None:
    sources = sorted(_AMX.glob("*.cpp")) + sorted(_AMX.glob("*.h"))
    assert len(sources) >= 4, f"AMX sources not found under {_AMX}"
    for path in sources:
        code = _code(path)
        for intrinsic in ("_tile_loadconfig", "_tile_loadd", "_tile_stream_loadd"):
            assert not re.search(rf"\b{intrinsic}\s*\(", code), (
                f"{path.name} calls {intrinsic}: use load_tile_config / STRATA_TILE_LOADD "
                "(cpu/amx/tile_ops.h)")
    ops = _code(_AMX / "tile_ops.h")
    assert re.search(r'"ldtilecfg %0"\s*:\s*:\s*"m"\(c\)', ops), (
        "LDTILECFG must take the whole TileConfig as its operand")
    assert re.search(r'tileloadd[^;]*"memory"', ops, re.S), "TILELOADD must clobber memory"
    users = [p.name for p in sources if "STRATA_TILE_LOADD(" in _code(p) and p.name != "tile_ops.h"]
    assert {"dot_repacked_amx.cpp", "amx_probe.cpp"} <= set(users)
