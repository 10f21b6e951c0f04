"""``strata inspect FILE``: what a GGUF file holds.

Prints the header (version, alignment, counts, sizes), the metadata (long arrays and strings
abbreviated), the tensor table and totals per tensor type; ``--json`` prints the same as one JSON
object. The file is validated in full first, so a malformed file gives one ``error:`` line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

import numpy as np

MAX_STRING_CHARS = 72


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "inspect",
        help="show a GGUF file's header, metadata and tensors",
        description="Validate a GGUF file and show its header, metadata and tensors.",
    )
    p.add_argument("file", help="path of the GGUF file")
    p.add_argument("--tensors", action=argparse.BooleanOptionalAction, default=True,
                   help="list every tensor (default: yes; totals per type are always shown)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--max-items", type=int, default=8, metavar="N",
                   help="array elements shown per key (default 8; 0 = all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from strata.gguf import GGUFFile

    f = GGUFFile(args.file)
    max_items = None if args.max_items <= 0 else args.max_items
    report = _report(f, max_items, args.tensors)
    try:
        if args.json:
            json.dump(report, sys.stdout, indent=2, ensure_ascii=False)
            sys.stdout.write("\n")
        else:
            _print_text(report)
        sys.stdout.flush()
    except BrokenPipeError:
        # `inspect ... | head`: the reader went away; that is not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _jsonable(v: Any) -> Any:
    """Python/numpy values as JSON-friendly ones (lists, ints, floats; non-finite floats as strings)."""
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _report(f: Any, max_items: int | None, with_tensors: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for key in f.keys():
        entry: dict[str, Any] = {"type": f.value_type(key)}
        length = f.array_length(key)
        entry["value"] = _jsonable(f.value(key, max_items=max_items))
        if length is not None:
            entry["length"] = length
            entry["truncated"] = max_items is not None and length > max_items
        metadata[key] = entry
    totals: dict[str, dict[str, int]] = {}
    for t in f.tensors:
        tot = totals.setdefault(t.type, {"tensors": 0, "elements": 0, "bytes": 0})
        tot["tensors"] += 1
        tot["elements"] += t.n_elements
        tot["bytes"] += t.nbytes
    report: dict[str, Any] = {
        "path": f.path,
        "version": f.version,
        "alignment": f.alignment,
        "file_size": f.file_size,
        "data_offset": f.data_offset,
        "metadata_count": len(metadata),
        "tensor_count": len(f.tensors),
        "tensor_bytes": sum(t.nbytes for t in f.tensors),
        "max_items": max_items,
        "metadata": metadata,
        "totals_by_type": totals,
    }
    if with_tensors:
        report["tensors"] = [
            {"name": t.name, "type": t.type, "shape": list(t.shape), "offset": t.offset, "nbytes": t.nbytes}
            for t in f.tensors
        ]
    return report


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _show_scalar(v: Any) -> str:
    if isinstance(v, str):
        if len(v) > MAX_STRING_CHARS:
            return json.dumps(v[:MAX_STRING_CHARS], ensure_ascii=False)[:-1] + f'..." ({len(v)} chars)'
        return json.dumps(v, ensure_ascii=False)
    return str(v)


def _show_nested(v: list[Any], max_items: int | None) -> str:
    # Nested arrays are cut at max_items too; a full-length one may have been cut.
    items = ", ".join(_show_nested(x, max_items) if isinstance(x, list) else _show_scalar(x) for x in v)
    more = ", ..." if max_items is not None and len(v) >= max_items else ""
    return f"[{items}{more}]"


def _show_value(entry: dict[str, Any], max_items: int | None) -> str:
    v = entry["value"]
    if "length" not in entry:
        return _show_scalar(v)
    items = ", ".join(_show_nested(x, max_items) if isinstance(x, list) else _show_scalar(x) for x in v)
    if entry.get("truncated"):
        return f"[{items}, ...] ({entry['length']} items)"
    return f"[{items}]"


def _print_text(r: dict[str, Any]) -> None:
    print(f"file        {r['path']}")
    print(f"version     {r['version']}")
    print(f"alignment   {r['alignment']}")
    print(f"size        {_size(r['file_size'])} ({r['file_size']} bytes)")
    print(f"metadata    {r['metadata_count']} keys")
    print(f"tensors     {r['tensor_count']} "
          f"({_size(r['tensor_bytes'])} of data from byte {r['data_offset']})")

    print("\nmetadata:")
    if r["metadata"]:
        kw = max(len(k) for k in r["metadata"])
        tw = max(len(e["type"]) for e in r["metadata"].values())
        for key, entry in r["metadata"].items():
            print(f"  {key:<{kw}}  {entry['type']:<{tw}}  {_show_value(entry, r['max_items'])}")

    if "tensors" in r:
        print("\ntensors (shape in GGUF order, innermost dimension first):")
        rows: list[tuple[str, ...]] = [
            (t["name"], t["type"], "[" + ", ".join(str(d) for d in t["shape"]) + "]", str(t["nbytes"]),
             str(t["offset"])) for t in r["tensors"]]
        _table(("name", "type", "shape", "bytes", "offset"), rows, right={3, 4})

    print("\ntotals by type:")
    rows = [(str(name), str(t["tensors"]), str(t["elements"]), str(t["bytes"]), _size(t["bytes"]))
            for name, t in sorted(r["totals_by_type"].items(), key=lambda kv: -kv[1]["bytes"])]
    rows.append(("all", str(r["tensor_count"]),
                 str(sum(t["elements"] for t in r["totals_by_type"].values())),
                 str(r["tensor_bytes"]), _size(r["tensor_bytes"])))
    _table(("type", "tensors", "elements", "bytes", "size"), rows, right={1, 2, 3, 4})


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], right: set[int]) -> None:
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  " + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                                for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    print(line(header))
    for r in rows:
        print(line(r))
