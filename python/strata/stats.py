"""``GenerationStats``: what one ``generate`` / ``chat`` call did and how fast.

A session's ``stats`` is the record of its latest call; it is updated while the call streams, so it can
be read mid-generation. Speculative fields are zero / empty when speculation was off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["GenerationStats"]


@dataclass
class GenerationStats:
    """Counters and timings of one generation.

    Attributes:
        prompt_tokens: tokens of the prompt (the new text plus, for chat, the re-rendered conversation).
        cached_tokens: prompt tokens whose KV cells were already in the session and were reused.
        prefill_tokens: tokens evaluated before the first generated one (prompt minus cache, plus the
            pending last token of the previous call).
        generated_tokens: tokens produced, including an end-of-generation token.
        prefill_seconds: wall time of the prefill (evaluation of the prompt and the first sample).
        decode_seconds: wall time from the first generated token to the last.
        finish_reason: ``"stop"`` (end-of-generation token or stop string), ``"length"`` (max_tokens or
            the context is full), or None while streaming / when the caller stopped early.
        speculative: whether MTP speculative decoding was used.
        rounds: speculative rounds (draft + verification windows).
        round_tokens: tokens committed by those rounds (accepted drafts + one each, fewer when generation
            ended inside a round).
        drafted: per draft step j, how many rounds proposed a draft at step j (after retention).
        accepted: per draft step j, how many of those drafts the verifier accepted.
        steps: decode evaluations (rounds plus single-token steps).
        adaptive: whether the drafts per round were chosen adaptively (``Config.speculative`` auto).
        draft_counts: draft_counts[n] = decode steps that verified n drafts (0 = a plain step).
        estimated_gain, measured_gain: adaptive speculation's expected speed-up over plain decoding
            from its cost and acceptance estimates, and the measured one (tokens per second of the
            rounds times the measured plain-step time), over the session's engine so far; measured is 0
            when not adaptive, still warming up, or no plain step was timed (docs/drafting.md). While a
            call streams they are refreshed when ``Session.stats`` is read, and at its end.
        seeded: whether adaptive speculation started from costs measured before (by an earlier session
            of the model, or an earlier process through the cost cache) instead of probing first.
        acceptance_prior: per draft step, the acceptance earlier runs measured in this verification
            context (greedy, or sampling at this temperature) that the estimate started from, or -1 where
            none was measured and it started at one half (docs/drafting.md, "Costs across processes").
        peak_held: rounds, over the session's engine so far, in which adaptive speculation held a due
            exploring round back because not even drafts accepted at the recent sampling distributions'
            peak probabilities could have paid (temperature > 0; docs/drafting.md, "Peak bound").
        peak_triggered: exploring rounds, over the session's engine so far, that adaptive speculation ran
            early because the target's recent confidence (the peak probabilities of its logits) predicted
            that drafting pays (temperature 0; docs/drafting.md, "Peak trigger").
        kv_type: how the session's K/V cells are stored, ``"f16"``, ``"f32"`` or ``"int8"`` (what
            ``Config.kv_type`` auto resolved to on this machine; docs/engine.md, "KV cells").
        expert_mode: the session's expert store, ``"mmap"`` or ``"stream"`` (docs/experts.md).
        expert_hits, expert_misses: routed-expert uses of this call found resident / not resident
            (prefill and decode; in mmap mode misses are counted only with the page-cache probe).
        expert_prefetch_hits: misses whose read had finished when the compute reached them.
        expert_prefetch_reads, expert_prefetch_used: experts read early on the previous layer's
            prediction (``Config.expert_prefetch``), and how many of them their layer then used (the
            rest is read for nothing). The used ones count as misses, every one of them in the bytes read.
        expert_draft_demotions: releases of experts that only a verification window's draft rows used to
            the store's least-recently-used end, the first to be evicted (stream mode, while the store's
            retention duel finds that this reads less; docs/experts.md, "Retention of draft rows").
        expert_bytes_read: expert bytes read by this call (stream mode).
        expert_stall_seconds: time the compute waited for expert reads.
        expert_decode_misses, expert_decode_bytes_read: the part of misses / bytes read after the
            prefill (what the per-token averages divide).
    """

    prompt_tokens: int = 0
    cached_tokens: int = 0
    prefill_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    finish_reason: str | None = None
    speculative: bool = False
    rounds: int = 0
    round_tokens: int = 0
    drafted: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    steps: int = 0
    adaptive: bool = False
    draft_counts: list[int] = field(default_factory=list)
    estimated_gain: float = 0.0
    measured_gain: float = 0.0
    seeded: bool = False
    acceptance_prior: list[float] = field(default_factory=list)
    peak_held: int = 0
    peak_triggered: int = 0
    kv_type: str = ""
    expert_mode: str = "mmap"
    expert_hits: int = 0
    expert_misses: int = 0
    expert_prefetch_hits: int = 0
    expert_prefetch_reads: int = 0
    expert_prefetch_used: int = 0
    expert_draft_demotions: int = 0
    expert_bytes_read: int = 0
    expert_stall_seconds: float = 0.0
    expert_decode_misses: int = 0
    expert_decode_bytes_read: int = 0
    window_cut_drafts: int = 0  # drafts exact window cuts dropped unverified (Config.moce_window_cut)

    # ------------------------------------------------------------------------------------ derived
    @property
    def total_seconds(self) -> float:
        return self.prefill_seconds + self.decode_seconds

    @property
    def prefill_tokens_per_second(self) -> float:
        return self.prefill_tokens / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        """Generated tokens after the first, per second of decoding (the first comes from the prefill)."""
        n = self.generated_tokens - 1
        return n / self.decode_seconds if n > 0 and self.decode_seconds > 0 else 0.0

    @property
    def tokens_per_round(self) -> float:
        """Committed tokens per speculative round (1 + accepted drafts); 0 without rounds."""
        return self.round_tokens / self.rounds if self.rounds else 0.0

    @property
    def acceptance(self) -> list[float]:
        """Per draft step j: the fraction of step-j drafts the verifier accepted."""
        return [a / d if d else 0.0 for a, d in zip(self.accepted, self.drafted, strict=True)]

    @property
    def expert_misses_per_token(self) -> float:
        """Expert misses per generated token after the first (decode only; the first comes from the
        prefill)."""
        n = self.generated_tokens - 1
        return self.expert_decode_misses / n if n > 0 else 0.0

    @property
    def expert_bytes_per_token(self) -> float:
        """Expert bytes read per generated token after the first (decode only)."""
        n = self.generated_tokens - 1
        return self.expert_decode_bytes_read / n if n > 0 else 0.0

    @property
    def expert_hit_rate(self) -> float:
        """hits / (hits + misses) of this call; 0 when no expert was used."""
        used = self.expert_hits + self.expert_misses
        return self.expert_hits / used if used else 0.0

    # ----------------------------------------------------------------------------------- updating
    def record_step(self, n_drafts: int) -> None:
        """One decode step that verified n_drafts drafts (0: a plain step)."""
        counts = self.draft_counts
        if n_drafts >= len(counts):
            counts.extend([0] * (n_drafts + 1 - len(counts)))
        counts[n_drafts] += 1

    def record_adaptive(self, snapshot: dict[str, Any] | None) -> None:
        """Take the gains from an engine ``spec_adaptive_stats()`` snapshot (None: nothing yet)."""
        if snapshot is not None:
            self.estimated_gain = float(snapshot["estimated_gain"])
            self.measured_gain = float(snapshot["measured_gain"])
            self.seeded = bool(snapshot["seeded"])
            self.acceptance_prior = [float(x) for x in snapshot.get("acceptance_prior", [])]
            self.peak_held = int(snapshot["peak_held"])
            self.peak_triggered = int(snapshot["peak_triggered"])

    def record_round(self, n_drafts: int, n_accepted: int, committed: int) -> None:
        """One speculative round: n_drafts verified, the first n_accepted accepted, `committed` tokens
        kept (n_accepted + 1, fewer when generation ended inside the round)."""
        while len(self.drafted) < n_drafts:
            self.drafted.append(0)
            self.accepted.append(0)
        for j in range(n_drafts):
            self.drafted[j] += 1
            if j < n_accepted:
                self.accepted[j] += 1
        self.rounds += 1
        self.round_tokens += committed

    # ------------------------------------------------------------------------------------ display
    def as_dict(self) -> dict[str, Any]:
        """Every counter and derived rate as plain values (JSON-ready)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "prefill_tokens": self.prefill_tokens,
            "generated_tokens": self.generated_tokens,
            "prefill_seconds": self.prefill_seconds,
            "decode_seconds": self.decode_seconds,
            "total_seconds": self.total_seconds,
            "prefill_tokens_per_second": self.prefill_tokens_per_second,
            "decode_tokens_per_second": self.decode_tokens_per_second,
            "finish_reason": self.finish_reason,
            "speculative": self.speculative,
            "steps": self.steps,
            "rounds": self.rounds,
            "round_tokens": self.round_tokens,
            "tokens_per_round": self.tokens_per_round,
            "drafted": list(self.drafted),
            "accepted": list(self.accepted),
            "acceptance": self.acceptance,
            "adaptive": self.adaptive,
            "draft_counts": list(self.draft_counts),
            "estimated_gain": self.estimated_gain,
            "measured_gain": self.measured_gain,
            "seeded": self.seeded,
            "acceptance_prior": list(self.acceptance_prior),
            "peak_held": self.peak_held,
            "peak_triggered": self.peak_triggered,
            "kv_type": self.kv_type,
            "expert_mode": self.expert_mode,
            "expert_hits": self.expert_hits,
            "expert_misses": self.expert_misses,
            "expert_prefetch_hits": self.expert_prefetch_hits,
            "expert_prefetch_reads": self.expert_prefetch_reads,
            "expert_prefetch_used": self.expert_prefetch_used,
            "expert_draft_demotions": self.expert_draft_demotions,
            "expert_bytes_read": self.expert_bytes_read,
            "expert_stall_seconds": self.expert_stall_seconds,
            "expert_decode_misses": self.expert_decode_misses,
            "expert_decode_bytes_read": self.expert_decode_bytes_read,
            "window_cut_drafts": self.window_cut_drafts,
            "expert_hit_rate": self.expert_hit_rate,
            "expert_misses_per_token": self.expert_misses_per_token,
            "expert_bytes_per_token": self.expert_bytes_per_token,
        }

    def summary(self) -> str:
        """A few human-readable lines (what ``--stats`` prints)."""
        lines = [
            f"prompt: {self.prompt_tokens} tokens ({self.cached_tokens} cached), "
            f"prefill {self.prefill_tokens} tokens in {self.prefill_seconds:.3f} s "
            f"({self.prefill_tokens_per_second:.1f} tok/s)"
            + (f"; K/V cells {self.kv_type}" if self.kv_type else ""),
            f"generated: {self.generated_tokens} tokens in {self.decode_seconds:.3f} s "
            f"({self.decode_tokens_per_second:.1f} tok/s), finish: {self.finish_reason or 'interrupted'}",
        ]
        if self.speculative:
            acc = ", ".join(f"{a:.2f}" for a in self.acceptance) or "-"
            lines.append(f"speculative: {self.rounds} rounds, {self.tokens_per_round:.2f} tokens/round, "
                         f"acceptance per draft step [{acc}]")
            counts = ", ".join(f"{n}:{c}" for n, c in enumerate(self.draft_counts) if c) or "-"
            line = f"drafts verified per step {{{counts}}}"
            if self.window_cut_drafts:
                line += f"; window cuts dropped {self.window_cut_drafts} drafts"
            if self.adaptive:
                # 0: nothing to divide by (no plain step timed, or no step yet after the warm-up)
                measured = (f"measured {self.measured_gain:.2f}x over a plain step" if self.measured_gain > 0
                            else "not measured (no plain step timed)")
                line += (f"; adaptive: estimated gain {self.estimated_gain:.2f}x, {measured}; "
                         + ("seeded with earlier costs" if self.seeded else "costs measured from scratch")
                         + (" and acceptance [" + ", ".join(f"{p:.2f}" if p >= 0 else "-"
                                                            for p in self.acceptance_prior) + "]"
                            if self.seeded and any(p >= 0 for p in self.acceptance_prior) else "")
                         + (f"; exploration held back {self.peak_held} rounds at low peak probabilities"
                            if self.peak_held else "")
                         + (f"; {self.peak_triggered} exploring rounds brought forward by high peak "
                            "probabilities" if self.peak_triggered else ""))
            lines.append(line)
        else:
            lines.append("speculative: off")
        lines.append(f"experts ({self.expert_mode}): {self.expert_hits} hits, {self.expert_misses} misses "
                     f"({self.expert_prefetch_hits} prefetched), {_mib(self.expert_bytes_read)} read, "
                     f"stall {self.expert_stall_seconds:.3f} s; per decoded token "
                     f"{self.expert_misses_per_token:.2f} misses, {_mib(self.expert_bytes_per_token)}"
                     + (f"; read ahead on prediction {self.expert_prefetch_reads}, used "
                        f"{self.expert_prefetch_used}" if self.expert_prefetch_reads else "")
                     + (f"; draft-only experts evicted first {self.expert_draft_demotions}"
                        if self.expert_draft_demotions else ""))
        return "\n".join(lines)

    # ----------------------------------------------------------------------------------- experts
    def record_experts(self, start: dict[str, Any], now: dict[str, Any], after_prefill: dict[str, Any] | None,
                       mode: str) -> None:
        """Set the expert counters from engine ``expert_stats()["total"]`` snapshots: at the call's
        start, now, and after the prefill (None while prefilling)."""
        self.expert_mode = mode
        self.expert_hits = int(now["hits"] - start["hits"])
        self.expert_misses = int(now["misses"] - start["misses"])
        self.expert_prefetch_hits = int(now["prefetch_hits"] - start["prefetch_hits"])
        self.expert_prefetch_reads = int(now["prefetch_reads"] - start["prefetch_reads"])
        self.expert_prefetch_used = int(now["prefetch_used"] - start["prefetch_used"])
        self.expert_draft_demotions = int(now["draft_demotions"] - start["draft_demotions"])
        self.expert_bytes_read = int(now["bytes_read"] - start["bytes_read"])
        self.expert_stall_seconds = float(now["stall_s"] - start["stall_s"])
        if after_prefill is not None:
            self.expert_decode_misses = int(now["misses"] - after_prefill["misses"])
            self.expert_decode_bytes_read = int(now["bytes_read"] - after_prefill["bytes_read"])


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.2f} MiB"
