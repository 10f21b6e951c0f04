"""Draft-retention economics (SPEC R-4): formulas, policy semantics, oracle, CLI, measured mode."""

from __future__ import annotations

import csv
import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from strata.bench import retention as rt
from strata.cli.__main__ import main

COSTS = rt.CostModel((1.0, 1.02, 1.25, 1.60), 0.15)


# --- formulas -------------------------------------------------------------------------------------


def test_hand_computed_round() -> None:
    a = [0.8, 0.5, 0.5]
    assert rt.cumulative_acceptance(a) == pytest.approx([0.8, 0.4, 0.2])
    assert [rt.committed_tokens(a, k) for k in range(4)] == pytest.approx([1.0, 1.8, 2.2, 2.4])
    assert [COSTS.round_cost(k) for k in range(4)] == pytest.approx([1.15, 1.17, 1.40, 1.75])
    assert COSTS.round_cost(0, drafted=False) == 1.0
    assert [rt.tokens_per_cost(a, k, COSTS) for k in range(4)] == pytest.approx(
        [1 / 1.15, 1.8 / 1.17, 2.2 / 1.40, 2.4 / 1.75]
    )
    # draft 0: 0.8 / 0.02 > 1 / 1.15; draft 1: 0.4 / 0.23 = 1.739 > 1.8 / 1.17 = 1.538;
    # draft 2: 0.2 / 0.35 = 0.571 < 2.2 / 1.40 = 1.571.
    assert [rt.retention_helps(a, k, COSTS) for k in range(3)] == [True, True, False]


def test_plain_decode_and_bad_costs() -> None:
    assert COSTS.plain_rate() == 1.0
    assert rt.CostModel((2.0, 3.0), 0.5).plain_rate() == 0.5
    with pytest.raises(rt.RetentionInputError, match="verifier cost for 2 rows must be > 0"):
        rt.CostModel((1.0, 0.0), 0.1)
    with pytest.raises(rt.RetentionInputError, match="draft cost must be >= 0"):
        rt.CostModel((1.0, 1.1), -0.1)
    with pytest.raises(rt.RetentionInputError, match="finite"):
        rt.CostModel((1.0, float("nan")), 0.1)
    with pytest.raises(rt.RetentionInputError, match="3 drafts need verifier costs for 1..4 rows"):
        rt.CostModel((1.0, 1.1, 1.2), 0.1).require_drafts(3)
    with pytest.raises(rt.RetentionInputError, match="acceptance"):
        rt.committed_tokens([0.5, 1.5], 2)


def test_criterion_equals_ratio_improvement_on_random_cases() -> None:
    rng = random.Random(7)
    checked = 0
    for _ in range(3000):
        k_max = rng.randint(1, 6)
        acc = [rng.random() ** rng.choice([0.3, 1.0, 3.0]) for _ in range(k_max)]
        # Arbitrary positive verifier costs, including non-monotone and flat steps.
        verifier = [rng.uniform(0.5, 3.0) for _ in range(k_max + 1)]
        if rng.random() < 0.2:
            verifier[1] = verifier[0]
        costs = rt.CostModel(tuple(verifier), rng.choice([0.0, rng.uniform(0, 1)]))
        for k in range(k_max):
            now = rt.tokens_per_cost(acc, k, costs)
            nxt = rt.tokens_per_cost(acc, k + 1, costs)
            if abs(nxt - now) < 1e-12:
                continue
            assert rt.retention_helps(acc, k, costs) == (nxt > now)
            checked += 1
    assert checked > 5000


def test_vector_committed_matches_scalar() -> None:
    rounds = rt.grid_rounds(3)
    table = rounds.committed()
    for n in (0, 17, 555, 999):
        acc = list(rounds.acceptance[n])
        assert list(table[n]) == pytest.approx([rt.committed_tokens(acc, k) for k in range(4)])


# --- policy semantics ----------------------------------------------------------------------------


def test_flat_policy_prefix_and_equality() -> None:
    p = rt.flat_policy(0.3)
    assert p.keep([0.3, 0.9, 0.9]) == 3  # equality passes
    assert p.keep([0.9, 0.29, 0.9]) == 1  # nothing kept past a rejected parent
    assert p.keep([0.1, 0.9]) == 0
    assert rt.flat_policy(0.0).keep([0.0, 0.0]) == 2  # a floor of 0 keeps everything


def test_schedule_last_entry_repeats() -> None:
    sched = rt.schedule_policy((0.9, 0.2))
    assert [sched.floor_at(j) for j in range(5)] == [0.9, 0.2, 0.2, 0.2, 0.2]
    assert sched.keep([0.95, 0.3, 0.25, 0.1]) == 3
    assert sched.keep([0.85, 0.99]) == 0
    rising = rt.schedule_policy((0.2, 0.9))  # any order
    assert rising.keep([0.3, 0.95, 0.95, 0.5]) == 3


def test_cumulative_product_gate() -> None:
    cum = rt.cumulative_policy(0.5)
    assert cum.keep([0.9, 0.8, 0.9]) == 3  # 0.9, 0.72, 0.648
    assert rt.cumulative_policy(0.7).keep([0.9, 0.8, 0.9]) == 2
    assert rt.cumulative_policy(0.25).keep([0.5, 0.5, 0.99]) == 2  # 0.25 == 0.25 passes
    assert rt.cumulative_policy(0.25).keep([0.2, 1.0]) == 0


def test_both_is_and_of_gates() -> None:
    both = rt.both_policy((0.5,), 0.3)
    assert both.keep([0.55, 0.55, 0.9, 0.45]) == 2  # flat alone keeps 3, the product stops it
    assert both.keep([0.9, 0.9, 0.45]) == 2  # cumulative alone keeps 3, the floor stops it
    rng = np.random.default_rng(3)
    for _ in range(300):
        chain = list(rng.random(rng.integers(1, 7)))
        sched = tuple(rng.random(rng.integers(1, 4)).round(2))
        floor = round(float(rng.random()), 2)
        expect = min(rt.schedule_policy(sched).keep(chain), rt.cumulative_policy(floor).keep(chain))
        assert rt.both_policy(sched, floor).keep(chain) == expect


def test_vectorized_keep_matches_scalar() -> None:
    rng = np.random.default_rng(11)
    conf = rng.random((400, 5))
    conf[rng.random(conf.shape) < 0.1] = 0.5  # exact ties with the floors below
    lengths = rng.integers(1, 6, size=400)
    policies = [rt.KEEP_ALL, rt.flat_policy(0.5), rt.schedule_policy((0.7, 0.5, 0.3)),
                rt.cumulative_policy(0.25), rt.both_policy((0.2, 0.5), 0.125)]
    for pol in policies:
        kept = pol.kept(conf, lengths)
        for n in range(400):
            assert kept[n] == pol.keep(list(conf[n, : lengths[n]]))


def test_policy_validation() -> None:
    with pytest.raises(rt.RetentionInputError, match="at most 8 entries"):
        rt.schedule_policy([0.5] * 9)
    with pytest.raises(rt.RetentionInputError, match="schedule\\[1\\] must be <= 1"):
        rt.schedule_policy([0.5, 1.5])
    with pytest.raises(rt.RetentionInputError, match="at least one entry"):
        rt.schedule_policy([])
    with pytest.raises(rt.RetentionInputError, match="cumulative floor must be finite"):
        rt.cumulative_policy(float("inf"))


# --- grid evaluation and the oracle --------------------------------------------------------------


def test_grid_baselines_hand_computed() -> None:
    report = rt.evaluate_grid(COSTS, 3)
    assert report.rounds == 1000
    keep_all = report.result("keep-all")
    # E[R] = 1 + E[c] + E[c]^2 + E[c]^3 with E[c] = 0.55 over the grid; C = 0.15 + 1.60.
    assert keep_all.tokens_per_round == pytest.approx(1 + 0.55 + 0.55**2 + 0.55**3)
    assert keep_all.cost_per_round == pytest.approx(1.75)
    assert keep_all.mean_kept == 3
    none = report.result("keep-none")
    assert (none.tokens_per_cost, none.mean_kept, none.speedup) == (1.0, 0.0, 1.0)
    flat_half = next(r for r in report.results if r.family == "flat" and r.setting == "p=0.5")
    # Kept = leading run of c >= 0.5 over 6 of 10 values per step: E[kept] = 0.6 + 0.36 + 0.216.
    assert flat_half.mean_kept == pytest.approx(0.6 + 0.36 + 0.216)


def _all_rows(report: rt.RetentionReport, exclude: tuple[str, ...]) -> list[rt.PolicyResult]:
    return [r for r in report.results if r.family not in exclude]


@pytest.mark.parametrize("verifier,draft", [((1.0, 1.02, 1.25, 1.60), 0.15), ((1.0, 1.3, 1.4, 2.5), 0.0),
                                            ((1.0, 1.0, 1.0, 1.0), 0.5), ((1.0, 2.0, 3.0, 4.0), 0.01)])
def test_oracle_never_beaten_on_grid(verifier: tuple[float, ...], draft: float) -> None:
    report = rt.evaluate_grid(rt.CostModel(verifier, draft), 3)
    oracle = report.result("oracle").tokens_per_cost
    skip = report.result("oracle+skip").tokens_per_cost
    for r in _all_rows(report, ("keep-none", "oracle+skip")):
        assert r.tokens_per_cost <= oracle * (1 + 1e-12), r
        assert r.gap_to_oracle >= -1e-12
    for r in report.results:
        assert r.tokens_per_cost <= skip * (1 + 1e-12), r


def test_oracle_is_the_brute_force_optimum() -> None:
    rng = np.random.default_rng(5)
    for trial in range(40):
        n, k = 4, 2
        conf = rng.random((n, k))
        lengths = rng.integers(1, k + 1, size=n)
        acc = np.where(np.arange(k)[None, :] < lengths[:, None], conf ** rng.uniform(0.5, 2), 0.0)
        rounds = rt.RoundSet(conf, acc, lengths.astype(np.int64))
        costs = rt.CostModel(tuple(np.sort(rng.uniform(0.5, 2.0, 3))), float(rng.uniform(0, 0.6)))
        value = rounds.committed()
        for allow_skip in (False, True):
            options = [[(value[i, j], costs.round_cost(j)) for j in range(lengths[i] + 1)] for i in range(n)]
            if allow_skip:
                options = [o + [(1.0, costs.round_cost(0, drafted=False))] for o in options]
            picks = itertools.product(*options)
            best = max(sum(r for r, _ in pick) / sum(c for _, c in pick) for pick in picks)
            _, rate = rt.oracle_choice(rounds, costs, allow_skip)
            assert rate == pytest.approx(best, rel=1e-12), (trial, allow_skip)


def test_report_summary_and_json_shape() -> None:
    report = rt.evaluate_grid(COSTS, 2)
    families = [r.family for r in report.summary()]
    assert families == ["keep-none", "keep-all", "flat", "cumulative", "schedule", "both", "oracle",
                        "oracle+skip"]
    doc = json.loads(json.dumps(report.as_dict()))
    assert doc["mode"] == "grid" and doc["rounds"] == 100 and doc["costs"]["draft"] == 0.15
    assert len(doc["results"]) == len(report.results)


def test_grid_limits() -> None:
    with pytest.raises(rt.RetentionInputError, match="1..5 drafts"):
        rt.grid_rounds(6)
    with pytest.raises(rt.RetentionInputError, match="need verifier costs for 1..4 rows"):
        rt.evaluate_grid(rt.CostModel((1.0, 1.1, 1.2), 0.1), 3)


# --- measured mode -------------------------------------------------------------------------------


def test_acceptance_estimate_counts_only_judged_drafts() -> None:
    rounds = [rt.MeasuredRound((0.95, 0.15, 0.95), (True, False, True)),  # the last was never judged
              rt.MeasuredRound((0.92, 0.91), (True, True))]
    bins = rt.estimate_acceptance(rounds, bins=10, prior=0.0)
    assert bins.n[9] == 3 and bins.accepted[9] == 3 and bins.rate[9] == 1.0
    assert bins.n[1] == 1 and bins.accepted[1] == 0 and bins.rate[1] == 0.0
    assert bins.rate[5] == pytest.approx(0.55)  # an empty bin falls back to its midpoint
    with_prior = rt.estimate_acceptance(rounds, bins=10, prior=1.0)
    assert with_prior.rate[9] == pytest.approx((3 + 0.95) / 4)


def test_measured_example_end_to_end(tmp_path: Path) -> None:
    path = rt.write_example(tmp_path / "rounds.json", rounds=3000, seed=1)
    data = rt.load_measured(path)
    assert len(data.rounds) == 3000 and data.costs is not None and data.costs.unit == "ms"
    report = rt.evaluate_measured(data, source=str(path))
    assert report.mode == "measured" and report.costs.draft == pytest.approx(3 * 1.6)
    # The generator's acceptance is c ** 1.3: well-filled bins recover it.
    assert report.acceptance is not None
    for b, n in enumerate(report.acceptance.n):
        mean = report.acceptance.mean_confidence[b]
        if n >= 300 and mean is not None:
            assert report.acceptance.rate[b] == pytest.approx(mean**1.3, abs=0.06)
    # Replay of keep-all uses the recorded flags directly.
    keep_all = report.result("keep-all")
    tokens = sum(1 + r.leading_accepted for r in data.rounds)
    assert keep_all.replay_tokens_per_cost == pytest.approx(tokens / (3000 * report.costs.round_cost(3)))
    oracle = report.result("oracle").tokens_per_cost
    for r in _all_rows(report, ("keep-none", "oracle+skip")):
        assert r.tokens_per_cost <= oracle * (1 + 1e-12)
    assert report.result("cumulative").tokens_per_cost > keep_all.tokens_per_cost


def test_measured_csv_matches_json(tmp_path: Path) -> None:
    data = rt.load_measured(rt.write_example(tmp_path / "r.json", rounds=200, seed=2))
    csv_path = tmp_path / "r.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "step", "confidence", "accepted"])
        for i, r in enumerate(data.rounds):
            for j, (c, a) in reversed(list(enumerate(zip(r.confidences, r.accepted, strict=True)))):
                w.writerow([f"r{i}", j, repr(c), "true" if a else "0"])
    from_csv = rt.load_measured(csv_path)
    assert from_csv.rounds == data.rounds and from_csv.costs is None
    a = rt.evaluate_measured(data)
    b = rt.evaluate_measured(from_csv, data.costs)
    assert [r.tokens_per_cost for r in a.results] == [r.tokens_per_cost for r in b.results]


def test_measured_file_errors(tmp_path: Path) -> None:
    def load(doc: object, name: str = "bad.json") -> None:
        p = tmp_path / name
        p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        rt.load_measured(p)

    good = rt.example_measured(rounds=2)
    with pytest.raises(rt.RetentionInputError, match="format must be"):
        load({**good, "format": "other"})
    with pytest.raises(rt.RetentionInputError, match="not valid JSON"):
        load("{")
    with pytest.raises(rt.RetentionInputError, match=r"rounds\[0\]: 2 confidences but 1 accepted"):
        load({**good, "rounds": [{"confidences": [0.5, 0.5], "accepted": [True]}]})
    with pytest.raises(rt.RetentionInputError, match=r"confidence\[1\] must be <= 1"):
        load({**good, "rounds": [{"confidences": [0.5, 1.5], "accepted": [True, False]}]})
    with pytest.raises(rt.RetentionInputError, match="accepted must be a boolean"):
        load({**good, "rounds": [{"confidences": [0.5], "accepted": ["maybe"]}]})
    with pytest.raises(rt.RetentionInputError, match="draft_step"):
        load({**good, "costs": {"verifier": [1, 2]}})
    with pytest.raises(rt.RetentionInputError, match="steps 0..n-1"):
        load("round,step,confidence,accepted\n0,0,0.5,1\n0,2,0.5,1\n", "bad.csv")
    with pytest.raises(rt.RetentionInputError, match="cannot read"):
        rt.load_measured(tmp_path / "missing.json")


# --- CLI -----------------------------------------------------------------------------------------


def test_cli_grid_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "retention", "--plain", "--max-drafts", "2"]) == 0
    out = capsys.readouterr().out
    for word in ("keep-none", "keep-all", "flat", "schedule", "cumulative", "both", "oracle", "tokens/cost"):
        assert word in out
    assert "100 rounds of up to 2 drafts" in out


def test_cli_rich_table_and_bad_costs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("rich")
    assert main(["bench", "retention", "--verifier-costs", "1,1.1,1.3,1.7", "--draft-cost", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "oracle+skip" in out and "1, 1.1, 1.3, 1.7" in out
    assert main(["bench", "retention", "--verifier-costs", "1,1.1"]) == 1
    assert "3 drafts need verifier costs for 1..4 rows" in capsys.readouterr().err


def test_cli_bench_group_without_tool(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench"]) == 2
    assert "retention" in capsys.readouterr().out


def test_cli_measured_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = tmp_path / "ex.json"
    assert main(["bench", "retention", "--write-example", str(example), "--example-rounds", "500"]) == 0
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    argv = ["bench", "retention", "--plain", "--measured", str(example), "--json", str(out_json),
            "--csv", str(out_csv)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "acceptance estimate" in out and "replayed tokens/cost" in out
    doc = json.loads(out_json.read_text())
    assert doc["mode"] == "measured" and doc["rounds"] == 500 and doc["costs"]["unit"] == "ms"
    assert sum(doc["acceptance_bins"]["n"]) > 500
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == len(doc["results"]) and rows[0]["family"] == "keep-none"
    # Flags override the file's costs.
    assert main(["bench", "retention", "--plain", "--measured", str(example), "--draft-cost", "0"]) == 0
    assert "draft cost per round 0 (ms)" in capsys.readouterr().out


def test_cli_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "r.png"
    assert main(["bench", "retention", "--plain", "--max-drafts", "2", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_module_entry_point() -> None:
    out = subprocess.run([sys.executable, "-m", "strata.cli", "bench", "retention", "--plain"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "1000 rounds of up to 3 drafts" in out.stdout and "oracle" in out.stdout
