"""Draft-retention economics (SPEC R-4): which drafts are worth sending to the verifier.

A round drafts a chain of up to K tokens; the drafter's probability of its own token at step i is
the confidence c_i, and a_i is the probability that the verifier accepts draft i given that drafts
0..i-1 were accepted. With A_i = a_0 * ... * a_i, keeping k drafts commits on average

    R_k = 1 + sum_{i<k} A_i                               tokens per round
    C_k = draft_cost + verifier_cost(k + 1)               cost per round (the draft is paid)
    C_plain = verifier_cost(1)                            plain decode: R = 1, no draft cost

and with the draft cost paid, retaining draft k helps iff A_k * C_k > R_k * dv_k, dv_k =
verifier_cost(k + 2) - verifier_cost(k + 1) (for dv_k > 0: A_k / dv_k > R_k / C_k), which is
exactly R_{k+1} / C_{k+1} > R_k / C_k. docs/retention-economics.md has the derivation.

Policies decide k from the confidences alone (the engine's STRATA_METAL_SPEC_MIN_P_SCHEDULE and
STRATA_METAL_SPEC_MIN_CUM_P semantics); they are scored by the long-run rate sum(R) / sum(C) over a
set of rounds — a synthetic grid (a_i = c_i) or rounds measured on a real model, whose acceptance is
estimated per confidence bin. The oracle picks k per round knowing the acceptance and maximises the
same rate (Dinkelbach's method), so no policy can beat it.

Pure Python + numpy: nothing here needs the native core, torch or a model.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

DEFAULT_VERIFIER_COSTS: tuple[float, ...] = (1.0, 1.02, 1.25, 1.60)
DEFAULT_DRAFT_COST = 0.15
DEFAULT_MAX_DRAFTS = 3
MAX_DRAFTS = 8  # the engine keeps at most 8 schedule entries; chains longer than that are not drafted
MAX_GRID_DRAFTS = 5  # the synthetic grid has 10^K chains
GRID: tuple[float, ...] = tuple(i / 10 for i in range(1, 11))
MEASURED_FORMAT = "strata.retention-rounds"
MEASURED_VERSION = 1
MAX_MEASURED_ROUNDS = 5_000_000


class RetentionInputError(ValueError):
    """Bad costs, policy settings or a malformed measured-rounds file (the message says which)."""


def _finite(name: str, value: object, lo: float | None = None, hi: float | None = None) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise RetentionInputError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise RetentionInputError(f"{name} must be finite, got {value!r}")
    if lo is not None and x < lo:
        raise RetentionInputError(f"{name} must be >= {lo}, got {x}")
    if hi is not None and x > hi:
        raise RetentionInputError(f"{name} must be <= {hi}, got {x}")
    return x


# ---------------------------------------------------------------------------------------------
# Cost model and the scalar formulas
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostModel:
    """verifier[r - 1] is the cost of one verifier pass over r rows; draft is the fixed cost of
    drafting one round's chain (the chained path drafts the whole chain before retention runs)."""

    verifier: tuple[float, ...] = DEFAULT_VERIFIER_COSTS
    draft: float = DEFAULT_DRAFT_COST
    unit: str = "plain-decode steps"
    draft_steps: tuple[float, ...] = ()  # measured per-step draft costs, when known (see for_drafts)

    def __post_init__(self) -> None:
        if not self.verifier:
            raise RetentionInputError("verifier costs must list at least the 1-row cost")
        if len(self.verifier) > MAX_DRAFTS + 1:
            raise RetentionInputError(f"at most {MAX_DRAFTS + 1} verifier costs (rows 1..{MAX_DRAFTS + 1})")
        costs = tuple(_finite(f"verifier cost for {r + 1} rows", v) for r, v in enumerate(self.verifier))
        for r, v in enumerate(costs):
            if v <= 0:
                raise RetentionInputError(f"verifier cost for {r + 1} rows must be > 0, got {v}")
        object.__setattr__(self, "verifier", costs)
        object.__setattr__(self, "draft", _finite("draft cost", self.draft, lo=0.0))
        steps = tuple(_finite(f"draft step cost [{i}]", s, lo=0.0) for i, s in enumerate(self.draft_steps))
        object.__setattr__(self, "draft_steps", steps)

    def for_drafts(self, max_drafts: int) -> CostModel:
        """With per-step draft costs, the model for chains of max_drafts: the chained path encodes
        every step before retention runs, so a round pays the first max_drafts step costs."""
        if not self.draft_steps:
            return self
        if len(self.draft_steps) < max_drafts:
            raise RetentionInputError(
                f"{max_drafts} drafts need {max_drafts} draft step costs, got {len(self.draft_steps)}"
            )
        return CostModel(self.verifier, sum(self.draft_steps[:max_drafts]), self.unit, self.draft_steps)

    @property
    def max_drafts(self) -> int:
        """The longest chain these costs can price (k drafts need k + 1 verifier rows)."""
        return len(self.verifier) - 1

    def require_drafts(self, max_drafts: int) -> None:
        if not 1 <= max_drafts <= MAX_DRAFTS:
            raise RetentionInputError(f"max drafts must be in 1..{MAX_DRAFTS}, got {max_drafts}")
        if max_drafts > self.max_drafts:
            raise RetentionInputError(
                f"{max_drafts} drafts need verifier costs for 1..{max_drafts + 1} rows, "
                f"got {len(self.verifier)}"
            )

    def verifier_cost(self, rows: int) -> float:
        if not 1 <= rows <= len(self.verifier):
            raise RetentionInputError(f"no verifier cost for {rows} rows (have 1..{len(self.verifier)})")
        return self.verifier[rows - 1]

    def round_cost(self, kept: int, drafted: bool = True) -> float:
        """C_k: the cost of a round that keeps `kept` drafts; drafted=False is plain decode."""
        if not drafted:
            if kept != 0:
                raise RetentionInputError("plain decode keeps no drafts")
            return self.verifier_cost(1)
        return self.draft + self.verifier_cost(kept + 1)

    def plain_rate(self) -> float:
        """Tokens per unit cost of plain decode (1 token per 1-row verifier pass)."""
        return 1.0 / self.verifier_cost(1)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"verifier": list(self.verifier), "draft": self.draft, "unit": self.unit}
        if self.draft_steps:
            out["draft_steps"] = list(self.draft_steps)
        return out


def cumulative_acceptance(acceptance: Sequence[float]) -> list[float]:
    """A_i = a_0 * ... * a_i: the probability that drafts 0..i are all accepted."""
    out: list[float] = []
    prod = 1.0
    for i, a in enumerate(acceptance):
        prod *= _finite(f"acceptance[{i}]", a, lo=0.0, hi=1.0)
        out.append(prod)
    return out


def committed_tokens(acceptance: Sequence[float], kept: int) -> float:
    """R_k = 1 + sum_{i<k} A_i: expected committed tokens of a round that keeps k drafts."""
    if not 0 <= kept <= len(acceptance):
        raise RetentionInputError(f"cannot keep {kept} of {len(acceptance)} drafts")
    return 1.0 + sum(cumulative_acceptance(acceptance)[:kept])


def tokens_per_cost(acceptance: Sequence[float], kept: int, costs: CostModel) -> float:
    """R_k / C_k for one round with the draft cost paid."""
    return committed_tokens(acceptance, kept) / costs.round_cost(kept)


def retention_helps(acceptance: Sequence[float], kept: int, costs: CostModel) -> bool:
    """The R-4 criterion: with k = `kept` drafts retained (and the draft paid), does retaining
    draft k as well raise tokens per cost? A_k * C_k > R_k * dv_k, i.e. A_k / dv_k > R_k / C_k
    when the verifier's marginal cost dv_k is positive."""
    if not 0 <= kept < len(acceptance):
        raise RetentionInputError(f"draft {kept} does not exist in a chain of {len(acceptance)}")
    a_k = cumulative_acceptance(acceptance)[kept]
    r_k = committed_tokens(acceptance, kept)
    c_k = costs.round_cost(kept)
    dv = costs.verifier_cost(kept + 2) - costs.verifier_cost(kept + 1)
    return a_k * c_k > r_k * dv


# ---------------------------------------------------------------------------------------------
# Retention policies (the engine's semantics, SPEC 2.7)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep the longest prefix of drafts whose every step passes the gates.

    schedule: per-step floors p_0, p_1, ...; the last repeats for later steps; () means no per-step
    floor (and a floor of 0 passes everything). cum_floor: keep step j only while
    c_0 * ... * c_j >= cum_floor (0 disables it). Both compose by AND; equality passes; the first
    failure ends the prefix.
    """

    family: str
    schedule: tuple[float, ...] = ()
    cum_floor: float = 0.0

    def __post_init__(self) -> None:
        if len(self.schedule) > MAX_DRAFTS:
            raise RetentionInputError(
                f"a schedule has at most {MAX_DRAFTS} entries, got {len(self.schedule)}"
            )
        sched = tuple(_finite(f"schedule[{i}]", p, 0.0, 1.0) for i, p in enumerate(self.schedule))
        object.__setattr__(self, "schedule", sched)
        object.__setattr__(self, "cum_floor", _finite("cumulative floor", self.cum_floor, 0.0, 1.0))

    @property
    def setting(self) -> str:
        parts = []
        if self.family == "flat":
            parts.append(f"p={self.schedule[0]:g}")
        elif self.schedule:
            parts.append("p=" + ",".join(f"{p:g}" for p in self.schedule))
        if self.cum_floor > 0:
            parts.append(f"cum>={self.cum_floor:g}")
        return " ".join(parts) if parts else "-"

    def params(self) -> dict[str, object]:
        return {"schedule": list(self.schedule), "cum_floor": self.cum_floor}

    def floor_at(self, step: int) -> float:
        if not self.schedule:
            return 0.0
        return self.schedule[min(step, len(self.schedule) - 1)]

    def keep(self, confidences: Sequence[float]) -> int:
        """How many drafts of one chain this policy retains (the scalar reference)."""
        prod = 1.0
        for j, c in enumerate(confidences):
            prod *= c
            if c < self.floor_at(j) or (self.cum_floor > 0 and prod < self.cum_floor):
                return j
        return len(confidences)

    def kept(self, confidences: FloatArray, lengths: IntArray) -> IntArray:
        """keep() for every row of an (N, K) confidence matrix whose row n has lengths[n] drafts."""
        n, k = confidences.shape
        passes = np.arange(k)[None, :] < lengths[:, None]
        if self.schedule:
            floors = np.array([self.floor_at(j) for j in range(k)], dtype=np.float64)
            passes &= confidences >= floors[None, :]
        if self.cum_floor > 0:
            passes &= np.cumprod(confidences, axis=1) >= self.cum_floor
        return np.cumprod(passes, axis=1).sum(axis=1).astype(np.int64) if k else np.zeros(n, np.int64)


def flat_policy(p: float) -> RetentionPolicy:
    return RetentionPolicy("flat", (p,))


def schedule_policy(schedule: Sequence[float]) -> RetentionPolicy:
    if not schedule:
        raise RetentionInputError("a schedule needs at least one entry")
    return RetentionPolicy("schedule", tuple(schedule))


def cumulative_policy(floor: float) -> RetentionPolicy:
    return RetentionPolicy("cumulative", (), floor)


def both_policy(schedule: Sequence[float], floor: float) -> RetentionPolicy:
    return RetentionPolicy("both", tuple(schedule), floor)


KEEP_ALL = RetentionPolicy("keep-all")


def _steps(lo: int, hi: int, den: int) -> list[float]:
    return [i / den for i in range(lo, hi + 1)]


def default_sweep(max_drafts: int) -> list[RetentionPolicy]:
    """The parameter grids evaluated by default: flat p and cumulative floors in steps of 0.05,
    every schedule of min(K, 3) entries from {0, 0.1, ..., 0.9}, and flat p x floor for both."""
    tenths = _steps(0, 9, 10)
    policies = [flat_policy(p) for p in _steps(0, 20, 20)]
    policies += [cumulative_policy(f) for f in _steps(1, 20, 20)]
    policies += [schedule_policy(s) for s in itertools.product(tenths, repeat=min(max_drafts, 3))]
    policies += [both_policy((p,), f) for p in _steps(1, 9, 10) for f in _steps(1, 9, 10)]
    return policies


# ---------------------------------------------------------------------------------------------
# Rounds and their evaluation
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundSet:
    """N draft rounds padded to K steps: confidences and modelled acceptance (0 past lengths[n]);
    realized[n], when known, is how many leading drafts the verifier actually accepted."""

    confidences: FloatArray
    acceptance: FloatArray
    lengths: IntArray
    realized: IntArray | None = None

    @property
    def size(self) -> int:
        return int(self.confidences.shape[0])

    @property
    def max_drafts(self) -> int:
        return int(self.confidences.shape[1])

    def committed(self) -> FloatArray:
        """(N, K + 1): R_k of every round for k = 0..K (valid for k <= lengths[n])."""
        cum = np.cumprod(self.acceptance, axis=1)
        return 1.0 + np.concatenate([np.zeros((self.size, 1)), np.cumsum(cum, axis=1)], axis=1)


def grid_rounds(max_drafts: int = DEFAULT_MAX_DRAFTS, grid: Sequence[float] = GRID) -> RoundSet:
    """Every chain of `max_drafts` confidences from the grid, with acceptance = confidence."""
    if not 1 <= max_drafts <= MAX_GRID_DRAFTS:
        raise RetentionInputError(
            f"the synthetic grid supports 1..{MAX_GRID_DRAFTS} drafts, got {max_drafts}"
        )
    values = [_finite("grid value", g, 0.0, 1.0) for g in grid]
    if not values:
        raise RetentionInputError("the grid is empty")
    conf = np.array(list(itertools.product(values, repeat=max_drafts)), dtype=np.float64)
    return RoundSet(conf, conf.copy(), np.full(conf.shape[0], max_drafts, dtype=np.int64))


@dataclass(frozen=True)
class PolicyResult:
    """One policy over a round set. tokens_per_cost = sum(R) / sum(C), the long-run rate;
    speedup = that rate over plain decode's; gap = 1 - rate / oracle rate."""

    family: str
    setting: str
    params: dict[str, object]
    mean_kept: float
    tokens_per_round: float
    cost_per_round: float
    tokens_per_cost: float
    speedup: float
    gap_to_oracle: float
    mean_round_ratio: float
    replay_tokens_per_cost: float | None

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Choice:
    """Per-round decision: drafts kept, and whether the round drafted at all (False = plain decode)."""

    kept: IntArray
    drafted: BoolArray


def _round_costs(costs: CostModel, choice: Choice) -> FloatArray:
    verifier = np.asarray(costs.verifier, dtype=np.float64)
    return verifier[choice.kept] + np.where(choice.drafted, costs.draft, 0.0)


def _score(
    rounds: RoundSet, costs: CostModel, choice: Choice
) -> tuple[float, float, float, float, float | None]:
    """(mean kept, E[R], E[C], mean R/C, replayed rate) of a choice."""
    committed = rounds.committed()
    r = committed[np.arange(rounds.size), choice.kept]
    c = _round_costs(costs, choice)
    replay: float | None = None
    if rounds.realized is not None:
        replay = float((1 + np.minimum(choice.kept, rounds.realized)).sum() / c.sum())
    return float(choice.kept.mean()), float(r.mean()), float(c.mean()), float((r / c).mean()), replay


def oracle_choice(rounds: RoundSet, costs: CostModel, allow_skip: bool = False) -> tuple[Choice, float]:
    """The per-round choice of k (0..lengths[n]; with allow_skip also plain decode) that maximises
    sum(R) / sum(C), knowing the acceptance. Dinkelbach: for a rate lam pick per round the option
    maximising R - lam * C; the resulting rate is >= lam, with equality only at the optimum."""
    costs.require_drafts(rounds.max_drafts)
    n, k = rounds.size, rounds.max_drafts
    value = rounds.committed()
    cost = np.broadcast_to(costs.draft + np.asarray(costs.verifier[: k + 1]), (n, k + 1))
    if allow_skip:  # column k + 1: plain decode
        value = np.concatenate([value, np.ones((n, 1))], axis=1)
        cost = np.concatenate([cost, np.full((n, 1), costs.verifier_cost(1))], axis=1)
    valid = np.arange(value.shape[1])[None, :] <= rounds.lengths[:, None]
    if allow_skip:
        valid[:, k + 1] = True
    rows = np.arange(n)
    rate = float(value[:, 0].sum() / cost[:, 0].sum())
    pick = np.zeros(n, dtype=np.int64)
    for _ in range(1000):
        score = np.where(valid, value - rate * cost, -np.inf)
        pick = np.argmax(score, axis=1)
        new_rate = float(value[rows, pick].sum() / cost[rows, pick].sum())
        if new_rate <= rate * (1 + 1e-14):
            rate = max(rate, new_rate)
            break
        rate = new_rate
    drafted = pick <= k
    kept = np.where(drafted, pick, 0).astype(np.int64)
    return Choice(kept, drafted), float(value[rows, pick].sum() / cost[rows, pick].sum())


def _result(family: str, setting: str, params: dict[str, object], rounds: RoundSet, costs: CostModel,
            choice: Choice, oracle_rate: float) -> PolicyResult:
    mean_kept, er, ec, ratio, replay = _score(rounds, costs, choice)
    rate = er / ec
    return PolicyResult(
        family=family, setting=setting, params=params, mean_kept=mean_kept, tokens_per_round=er,
        cost_per_round=ec, tokens_per_cost=rate, speedup=rate / costs.plain_rate(),
        gap_to_oracle=1.0 - rate / oracle_rate, mean_round_ratio=ratio, replay_tokens_per_cost=replay,
    )


BASELINE_FAMILIES = ("keep-none", "keep-all", "oracle", "oracle+skip")


@dataclass
class RetentionReport:
    mode: str
    costs: CostModel
    max_drafts: int
    rounds: int
    results: list[PolicyResult]
    acceptance: AcceptanceBins | None = None
    source: str | None = None

    def result(self, family: str) -> PolicyResult:
        """The best result of a family (the only one for the baselines)."""
        rows = [r for r in self.results if r.family == family]
        if not rows:
            raise KeyError(family)
        return max(rows, key=lambda r: r.tokens_per_cost)

    def summary(self) -> list[PolicyResult]:
        """Baselines, then the best setting of each swept family, then the oracles."""
        families: list[str] = []
        for r in self.results:
            if r.family not in families:
                families.append(r.family)
        order = ["keep-none", "keep-all"] + [f for f in families if f not in BASELINE_FAMILIES]
        return [self.result(f) for f in order + ["oracle", "oracle+skip"] if f in families]

    def as_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "source": self.source,
            "costs": self.costs.as_dict(),
            "max_drafts": self.max_drafts,
            "rounds": self.rounds,
            "acceptance_bins": self.acceptance.as_dict() if self.acceptance else None,
            "summary": [r.as_dict() for r in self.summary()],
            "results": [r.as_dict() for r in self.results],
        }


def evaluate(rounds: RoundSet, costs: CostModel, policies: Iterable[RetentionPolicy], mode: str = "custom",
             acceptance: AcceptanceBins | None = None, source: str | None = None) -> RetentionReport:
    """Score keep-none, keep-all, every policy and both oracles on a round set."""
    costs.require_drafts(rounds.max_drafts)
    if rounds.size == 0:
        raise RetentionInputError("no rounds to evaluate")
    oracle, oracle_rate = oracle_choice(rounds, costs)
    skip, _ = oracle_choice(rounds, costs, allow_skip=True)
    n = rounds.size
    none = Choice(np.zeros(n, np.int64), np.zeros(n, np.bool_))
    drafted = np.ones(n, np.bool_)

    def row(family: str, setting: str, params: dict[str, object], choice: Choice) -> PolicyResult:
        return _result(family, setting, params, rounds, costs, choice, oracle_rate)

    results = [
        row("keep-none", "plain decode", {}, none),
        row("keep-all", "-", {}, Choice(rounds.lengths.astype(np.int64), drafted)),
    ]
    for policy in policies:
        kept = policy.kept(rounds.confidences, rounds.lengths)
        results.append(row(policy.family, policy.setting, policy.params(), Choice(kept, drafted)))
    results.append(row("oracle", "knows acceptance", {}, oracle))
    results.append(row("oracle+skip", "may skip drafting", {}, skip))
    return RetentionReport(mode, costs, rounds.max_drafts, n, results, acceptance, source)


def evaluate_grid(costs: CostModel | None = None, max_drafts: int = DEFAULT_MAX_DRAFTS,
                  policies: Iterable[RetentionPolicy] | None = None) -> RetentionReport:
    """Mode 1: every grid chain, acceptance = confidence."""
    costs = (costs or CostModel()).for_drafts(max_drafts)
    costs.require_drafts(max_drafts)
    rounds = grid_rounds(max_drafts)
    sweep = default_sweep(max_drafts) if policies is None else policies
    return evaluate(rounds, costs, sweep, mode="grid")


# ---------------------------------------------------------------------------------------------
# Measured rounds: file format, acceptance estimate, example generator
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredRound:
    """One recorded round with retention off: the drafter's confidence per step and whether the
    verifier accepted each draft (entries after the first rejection were never judged)."""

    confidences: tuple[float, ...]
    accepted: tuple[bool, ...]

    @property
    def leading_accepted(self) -> int:
        for i, ok in enumerate(self.accepted):
            if not ok:
                return i
        return len(self.accepted)


@dataclass
class MeasuredData:
    rounds: list[MeasuredRound]
    costs: CostModel | None = None
    model: str | None = None
    meta: dict[str, object] = field(default_factory=dict)


def _parse_bool(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "true", "false"):
        return value.strip().lower() in ("1", "true")
    raise RetentionInputError(f"{where}: accepted must be a boolean (true/false/0/1), got {value!r}")


def _make_round(conf: Sequence[object], acc: Sequence[object], where: str) -> MeasuredRound:
    if len(conf) == 0:
        raise RetentionInputError(f"{where}: a round needs at least one draft")
    if len(conf) > MAX_DRAFTS:
        raise RetentionInputError(f"{where}: at most {MAX_DRAFTS} drafts per round, got {len(conf)}")
    if len(acc) != len(conf):
        raise RetentionInputError(
            f"{where}: {len(conf)} confidences but {len(acc)} accepted flags (record with retention off)"
        )
    c = tuple(_finite(f"{where}: confidence[{i}]", v, 0.0, 1.0) for i, v in enumerate(conf))
    a = tuple(_parse_bool(v, f"{where}: step {i}") for i, v in enumerate(acc))
    return MeasuredRound(c, a)


def _costs_from_json(obj: object, where: str) -> CostModel:
    if not isinstance(obj, dict):
        raise RetentionInputError(f"{where}: 'costs' must be an object")
    verifier = obj.get("verifier")
    if not isinstance(verifier, list):
        raise RetentionInputError(f"{where}: costs.verifier must be a list of costs for 1, 2, ... rows")
    unit = str(obj.get("unit", "measured units"))
    if "draft_round" in obj:
        draft = _finite(f"{where}: costs.draft_round", obj["draft_round"], lo=0.0)
        return CostModel(tuple(verifier), draft, unit)
    if "draft_step" not in obj:
        raise RetentionInputError(f"{where}: costs need draft_step (per step) or draft_round")
    step = obj["draft_step"]
    steps = step if isinstance(step, list) else [step] * (len(verifier) - 1)
    if not steps:
        raise RetentionInputError(f"{where}: costs.draft_step is empty")
    per_step = tuple(_finite(f"{where}: costs.draft_step[{i}]", s, lo=0.0) for i, s in enumerate(steps))
    return CostModel(tuple(verifier), sum(per_step), unit, per_step)


def load_measured(path: str | Path) -> MeasuredData:
    """Read measured rounds: JSON (see docs/retention-economics.md) or CSV with columns
    round,step,confidence,accepted (one row per draft step; costs then come from the caller)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise RetentionInputError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise RetentionInputError(f"{p}: not UTF-8 text") from None
    if p.suffix.lower() == ".csv":
        return _load_csv(text, str(p))
    return _load_json(text, str(p))


def _load_json(text: str, where: str) -> MeasuredData:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RetentionInputError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise RetentionInputError(f"{where}: the top level must be an object")
    fmt = doc.get("format")
    if fmt != MEASURED_FORMAT:
        raise RetentionInputError(f"{where}: format must be {MEASURED_FORMAT!r}, got {fmt!r}")
    if doc.get("version") != MEASURED_VERSION:
        raise RetentionInputError(
            f"{where}: unsupported version {doc.get('version')!r} (want {MEASURED_VERSION})"
        )
    raw = doc.get("rounds")
    if not isinstance(raw, list) or not raw:
        raise RetentionInputError(f"{where}: 'rounds' must be a non-empty list")
    if len(raw) > MAX_MEASURED_ROUNDS:
        raise RetentionInputError(f"{where}: at most {MAX_MEASURED_ROUNDS} rounds, got {len(raw)}")
    rounds = []
    for i, r in enumerate(raw):
        if not isinstance(r, dict) or not isinstance(r.get("confidences"), list) \
                or not isinstance(r.get("accepted"), list):
            raise RetentionInputError(f"{where}: rounds[{i}] needs lists 'confidences' and 'accepted'")
        rounds.append(_make_round(r["confidences"], r["accepted"], f"{where}: rounds[{i}]"))
    costs = _costs_from_json(doc["costs"], where) if doc.get("costs") is not None else None
    model = doc.get("model")
    meta = doc.get("meta")
    return MeasuredData(rounds, costs, str(model) if model is not None else None,
                        dict(meta) if isinstance(meta, dict) else {})


def _load_csv(text: str, where: str) -> MeasuredData:
    reader = csv.DictReader(text.splitlines())
    need = {"round", "step", "confidence", "accepted"}
    if reader.fieldnames is None or not need <= {f.strip() for f in reader.fieldnames}:
        raise RetentionInputError(f"{where}: CSV header must include {', '.join(sorted(need))}")
    steps: dict[str, list[tuple[int, str, str]]] = {}
    for line, row in enumerate(reader, start=2):
        row = {(k or "").strip(): v for k, v in row.items()}
        try:
            step = int(row["step"])
        except (TypeError, ValueError):
            raise RetentionInputError(
                f"{where}:{line}: step must be an integer, got {row['step']!r}"
            ) from None
        steps.setdefault(str(row["round"]).strip(), []).append((step, row["confidence"], row["accepted"]))
        if len(steps) > MAX_MEASURED_ROUNDS:
            raise RetentionInputError(f"{where}: at most {MAX_MEASURED_ROUNDS} rounds")
    if not steps:
        raise RetentionInputError(f"{where}: no rounds")
    rounds = []
    for rid, items in steps.items():
        items.sort(key=lambda t: t[0])
        if [s for s, _, _ in items] != list(range(len(items))):
            raise RetentionInputError(f"{where}: round {rid!r} must have steps 0..n-1 exactly once")
        conf, acc = [c for _, c, _ in items], [a for _, _, a in items]
        rounds.append(_make_round(conf, acc, f"{where}: round {rid!r}"))
    return MeasuredData(rounds)


@dataclass(frozen=True)
class AcceptanceBins:
    """Acceptance as a function of confidence: equal-width bins over [0, 1]. Only steps the verifier
    judged count (all earlier drafts accepted). rate = (accepted + prior * mid) / (n + prior): a bin
    with few samples leans towards 'acceptance = confidence'."""

    edges: tuple[float, ...]
    n: tuple[int, ...]
    accepted: tuple[int, ...]
    mean_confidence: tuple[float | None, ...]
    rate: tuple[float, ...]
    prior: float

    def predict(self, confidences: FloatArray) -> FloatArray:
        bins = len(self.rate)
        idx = np.clip((confidences * bins).astype(np.int64), 0, bins - 1)
        return np.asarray(self.rate, dtype=np.float64)[idx]

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def estimate_acceptance(
    rounds: Sequence[MeasuredRound], bins: int = 10, prior: float = 1.0
) -> AcceptanceBins:
    if not 1 <= bins <= 1000:
        raise RetentionInputError(f"bins must be in 1..1000, got {bins}")
    prior = _finite("prior", prior, lo=0.0)
    n = [0] * bins
    acc = [0] * bins
    conf_sum = [0.0] * bins
    for r in rounds:
        for c, ok in zip(r.confidences, r.accepted, strict=True):
            b = min(int(c * bins), bins - 1)
            n[b] += 1
            acc[b] += int(ok)
            conf_sum[b] += c
            if not ok:
                break  # later drafts were never judged
    edges = tuple(i / bins for i in range(bins + 1))
    rate = []
    for b in range(bins):
        mid = (edges[b] + edges[b + 1]) / 2
        rate.append((acc[b] + prior * mid) / (n[b] + prior) if n[b] + prior > 0 else mid)
    mean_conf = tuple(conf_sum[b] / n[b] if n[b] else None for b in range(bins))
    return AcceptanceBins(edges, tuple(n), tuple(acc), mean_conf, tuple(rate), prior)


def measured_rounds(rounds: Sequence[MeasuredRound], model: AcceptanceBins, max_drafts: int) -> RoundSet:
    """Pad/truncate the rounds to max_drafts steps and attach the modelled acceptance."""
    if not 1 <= max_drafts <= MAX_DRAFTS:
        raise RetentionInputError(f"max drafts must be in 1..{MAX_DRAFTS}, got {max_drafts}")
    if not rounds:
        raise RetentionInputError("no measured rounds")
    n = len(rounds)
    conf = np.zeros((n, max_drafts), dtype=np.float64)
    lengths = np.zeros(n, dtype=np.int64)
    realized = np.zeros(n, dtype=np.int64)
    for i, r in enumerate(rounds):
        m = min(len(r.confidences), max_drafts)
        conf[i, :m] = r.confidences[:m]
        lengths[i] = m
        realized[i] = min(r.leading_accepted, m)
    acceptance = np.where(np.arange(max_drafts)[None, :] < lengths[:, None], model.predict(conf), 0.0)
    return RoundSet(conf, acceptance, lengths, realized)


def evaluate_measured(
    data: MeasuredData,
    costs: CostModel | None = None,
    max_drafts: int = DEFAULT_MAX_DRAFTS,
    bins: int = 10,
    policies: Iterable[RetentionPolicy] | None = None,
    source: str | None = None,
) -> RetentionReport:
    """Mode 2: policies on measured rounds with acceptance estimated per confidence bin. Costs:
    the caller's, else the file's, else the defaults."""
    chosen = (costs or data.costs or CostModel()).for_drafts(max_drafts)
    chosen.require_drafts(max_drafts)
    model = estimate_acceptance(data.rounds, bins)
    rounds = measured_rounds(data.rounds, model, max_drafts)
    sweep = default_sweep(max_drafts) if policies is None else policies
    return evaluate(rounds, chosen, sweep, mode="measured", acceptance=model, source=source)


def example_measured(rounds: int = 2000, max_drafts: int = DEFAULT_MAX_DRAFTS, seed: int = 0,
                     sharpness: float = 1.3) -> dict[str, object]:
    """A synthetic measured-rounds document: confidences ~ Beta(2.2, 1.2) drifting down with depth,
    acceptance = c ** sharpness (an over-confident drafter), plausible costs in milliseconds."""
    if not 1 <= rounds <= MAX_MEASURED_ROUNDS:
        raise RetentionInputError(f"rounds must be in 1..{MAX_MEASURED_ROUNDS}, got {rounds}")
    if not 1 <= max_drafts <= MAX_DRAFTS:
        raise RetentionInputError(f"max drafts must be in 1..{MAX_DRAFTS}, got {max_drafts}")
    rng = np.random.default_rng(seed)
    conf = rng.beta(2.2, 1.2, size=(rounds, max_drafts)) * (0.97 ** np.arange(max_drafts))[None, :]
    conf = np.round(conf, 4)
    ok = rng.random((rounds, max_drafts)) < conf**sharpness
    step_ms = 1.6
    verifier_ms = [20.0 * v for v in (1.0, 1.02, 1.25, 1.60, 1.95, 2.3, 2.65, 3.0, 3.35)][: max_drafts + 1]
    return {
        "format": MEASURED_FORMAT,
        "version": MEASURED_VERSION,
        "model": f"synthetic example (seed {seed}, acceptance = confidence^{sharpness:g})",
        "costs": {"unit": "ms", "verifier": verifier_ms, "draft_step": [step_ms] * max_drafts},
        "rounds": [
            {"confidences": [float(c) for c in conf[i]], "accepted": [bool(a) for a in ok[i]]}
            for i in range(rounds)
        ],
    }


def write_example(path: str | Path, rounds: int = 2000, max_drafts: int = DEFAULT_MAX_DRAFTS,
                  seed: int = 0) -> Path:
    p = Path(path)
    doc = example_measured(rounds, max_drafts, seed)
    try:
        p.write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    except OSError as exc:
        raise RetentionInputError(f"{p}: cannot write ({exc.strerror or exc})") from None
    return p
