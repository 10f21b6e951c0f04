"""The retention report's tables, CSV and plot: ``strata bench retention`` (cli/bench_cmd.py) and
``strata bench spec`` (cli/bench_spec_cmd.py) both print it, so it lives apart from both commands
and neither imports the other."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

from strata.bench import retention as rt

# --- tables --------------------------------------------------------------------------------------

_COLUMNS = ("policy", "setting", "drafts kept", "tokens/round", "cost/round", "tokens/cost", "speedup",
            "vs oracle")


def _cells(r: rt.PolicyResult, replay: bool) -> list[str]:
    vs_oracle = round(-100 * r.gap_to_oracle, 2) + 0.0  # no "-0.00%"
    cells = [
        r.family, r.setting, f"{r.mean_kept:.3f}", f"{r.tokens_per_round:.4f}", f"{r.cost_per_round:#.4g}",
        f"{r.tokens_per_cost:#.4g}", f"{r.speedup:.4f}", f"{vs_oracle:+.2f}%",
    ]
    if replay:
        cells.append(f"{r.replay_tokens_per_cost:#.4g}" if r.replay_tokens_per_cost is not None else "-")
    return cells


def _title(report: rt.RetentionReport) -> list[str]:
    c = report.costs
    what = "synthetic grid 0.1..1.0, acceptance = confidence" if report.mode == "grid" else \
        f"measured rounds from {report.source}, acceptance per confidence bin"
    drafts = f"{report.max_drafts} draft{'s' if report.max_drafts > 1 else ''}"
    return [
        f"draft retention economics: {what}",
        f"{report.rounds} rounds of up to {drafts}; verifier cost for 1..{len(c.verifier)} rows "
        f"{', '.join(f'{v:g}' for v in c.verifier)}; draft cost per round {c.draft:g} ({c.unit})",
    ]


def _acceptance_rows(bins: rt.AcceptanceBins) -> list[list[str]]:
    rows = []
    for b in range(len(bins.rate)):
        mean = bins.mean_confidence[b]
        close = "]" if b == len(bins.rate) - 1 else ")"
        rows.append([f"[{bins.edges[b]:.2f}, {bins.edges[b + 1]:.2f}{close}", str(bins.n[b]),
                     str(bins.accepted[b]), "-" if mean is None else f"{mean:.3f}", f"{bins.rate[b]:.3f}"])
    return rows


_ACCEPTANCE_COLUMNS = ("confidence", "judged", "accepted", "mean confidence", "acceptance")


def print_report(report: rt.RetentionReport, full: bool = False, plain: bool = False) -> None:
    results = report.results if full else report.summary()
    replay = report.mode == "measured"
    columns = list(_COLUMNS) + (["replayed tokens/cost"] if replay else [])
    rows = [_cells(r, replay) for r in results]
    note = ("tokens/cost = sum(R) / sum(C) over the rounds; speedup = that over plain decode; "
            "vs oracle: relative to the best per-round retention knowing the acceptance")
    if replay:
        note += "; replayed: the recorded accept flags instead of the binned estimate"
    rich_print = None if plain else _rich_printer()
    if rich_print is not None:
        rich_print(_title(report), columns, rows, note, 2)
        if report.acceptance is not None:
            rich_print(["acceptance estimate (only drafts the verifier judged)"], list(_ACCEPTANCE_COLUMNS),
                       _acceptance_rows(report.acceptance), None, 1)
        return
    print("\n".join(_title(report)))
    print(_plain_table(columns, rows, left=2))
    print(note)
    if report.acceptance is not None:
        print("\nacceptance estimate (only drafts the verifier judged)")
        print(_plain_table(list(_ACCEPTANCE_COLUMNS), _acceptance_rows(report.acceptance), left=1))


def _plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> str:
    """Columns padded to width; the first `left` flush left, the numbers flush right."""
    widths = [max(len(columns[i]), *(len(r[i]) for r in rows)) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        padded = (c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in pairs)
        return "  ".join(padded).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _rich_printer() -> Callable[[list[str], list[str], list[list[str]], str | None, int], None] | None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        return None
    console = Console()
    if not console.is_terminal:  # piped: rich would assume 80 columns and squeeze the table
        console = Console(width=200)

    def show(title: list[str], columns: list[str], rows: list[list[str]], caption: str | None,
             left: int) -> None:
        table = Table(title="\n".join(title), caption=caption, title_justify="left", caption_justify="left")
        for i, c in enumerate(columns):
            table.add_column(c, justify="left" if i < left else "right", no_wrap=True)
        for r in rows:
            table.add_row(*r)
        console.print(table)

    return show


# --- files ---------------------------------------------------------------------------------------

_CSV_FIELDS = ("family", "setting", "schedule", "cum_floor", "mean_kept", "tokens_per_round",
               "cost_per_round", "tokens_per_cost", "speedup", "gap_to_oracle", "mean_round_ratio",
               "replay_tokens_per_cost")


def write_csv(report: rt.RetentionReport, path: Path) -> None:
    try:
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(_CSV_FIELDS)
            for r in report.results:
                schedule = r.params.get("schedule", [])
                w.writerow([
                    r.family, r.setting, ";".join(f"{p:g}" for p in schedule)  # type: ignore[attr-defined]
                    if schedule else "", r.params.get("cum_floor", ""), r.mean_kept, r.tokens_per_round,
                    r.cost_per_round, r.tokens_per_cost, r.speedup, r.gap_to_oracle, r.mean_round_ratio,
                    "" if r.replay_tokens_per_cost is None else r.replay_tokens_per_cost,
                ])
    except OSError as exc:
        raise rt.RetentionInputError(f"{path}: cannot write ({exc.strerror or exc})") from None


def _curve(results: Sequence[rt.PolicyResult], x_of: Callable[[rt.PolicyResult], float]) -> tuple[
        list[float], list[float]]:
    """Best tokens/cost per x value (the envelope over a family's other parameters)."""
    best: dict[float, float] = {}
    for r in results:
        x = x_of(r)
        best[x] = max(best.get(x, float("-inf")), r.tokens_per_cost)
    xs = sorted(best)
    return xs, [best[x] for x in xs]


def _first(r: rt.PolicyResult) -> float:
    schedule = r.params.get("schedule")
    return float(schedule[0]) if isinstance(schedule, list) and schedule else 0.0


def _floor(r: rt.PolicyResult) -> float:
    return float(r.params.get("cum_floor", 0.0))  # type: ignore[arg-type]


def plot_report(report: rt.RetentionReport, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise rt.RetentionInputError("--plot needs matplotlib (pip install matplotlib)") from None
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    curves: tuple[tuple[str, Callable[[rt.PolicyResult], float], str], ...] = (
        ("flat", _first, "flat min-p: p"),
        ("schedule", _first, "schedule: p_0 (best over the rest)"),
        ("cumulative", _floor, "cumulative: floor"),
        ("both", _floor, "both: floor (best over p)"),
    )
    fam = {f: [r for r in report.results if r.family == f] for f, _, _ in curves}
    for family, x_of, label in curves:
        if fam[family]:
            xs, ys = _curve(fam[family], x_of)
            left.plot(xs, ys, marker=".", label=label)
    for family, style in (("oracle", "k--"), ("keep-all", "r:"), ("keep-none", "g:")):
        left.axhline(report.result(family).tokens_per_cost, linestyle=style[1:], color=style[0], label=family)
    left.set_xlabel("parameter")
    left.set_ylabel(f"committed tokens per unit cost ({report.costs.unit})")
    left.set_title("tokens/cost vs parameter")
    left.legend(fontsize=8)
    for family, rows in fam.items():
        if rows:
            right.scatter([r.mean_kept for r in rows], [r.tokens_per_cost for r in rows], s=8, label=family,
                          alpha=0.6)
    for family, marker in (("oracle", "*"), ("keep-all", "s"), ("keep-none", "o")):
        r = report.result(family)
        right.scatter([r.mean_kept], [r.tokens_per_cost], marker=marker, s=90, color="k", label=family)
    right.set_xlabel("drafts kept per round")
    right.set_ylabel("tokens per cost")
    right.set_title("every evaluated setting")
    right.legend(fontsize=8)
    fig.suptitle(_title(report)[0], fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise rt.RetentionInputError(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)
