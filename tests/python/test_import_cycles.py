"""No import cycles among strata's Python modules (the static graph of every import statement, lazy
ones inside functions included, ``from pkg import submodule`` counted as an import of the submodule)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "python"


def _modules() -> dict[str, Path]:
    out = {}
    for p in (ROOT / "strata").rglob("*.py"):
        rel = p.relative_to(ROOT).with_suffix("")
        out[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = p
    return out


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                subs = {f"{base}.{a.name}" for a in node.names}
                deps |= subs
                if not subs <= set(mods) | {f"{base}._strata"}:  # names defined in `base` itself
                    deps.add(base)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(n: str, stack: list[str]) -> list[str] | None:
        state[n] = 1
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d, stack + [d])):
                return found
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n, [n])):
            return found
    return None


def test_no_import_cycles() -> None:
    mods = _modules()
    assert "strata.session" in mods and "strata.model" in mods
    assert _cycle(_graph(mods)) is None


def test_the_checker_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
