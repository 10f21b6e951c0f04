"""Server counters, exposed at /metrics in the Prometheus text format."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Metrics:
    """Totals since the server started; updated by the decode thread, read by /metrics."""

    requests: int = 0
    requests_cancelled: int = 0
    requests_failed: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    prefill_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    rounds: int = 0
    round_tokens: int = 0
    expert_hits: int = 0
    expert_misses: int = 0
    expert_bytes_read: int = 0
    last_decode_tokens_per_second: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, stats: Any, experts: dict[str, int], cancelled: bool) -> None:
        """Add one finished (or cancelled) generation: its GenerationStats and expert-store deltas."""
        with self._lock:
            self.requests += 1
            self.requests_cancelled += int(cancelled)
            self.prompt_tokens += stats.prompt_tokens
            self.cached_tokens += stats.cached_tokens
            self.prefill_tokens += stats.prefill_tokens
            self.generated_tokens += stats.generated_tokens
            self.prefill_seconds += stats.prefill_seconds
            self.decode_seconds += stats.decode_seconds
            self.rounds += stats.rounds
            self.round_tokens += stats.round_tokens
            self.expert_hits += experts.get("hits", 0)
            self.expert_misses += experts.get("misses", 0)
            self.expert_bytes_read += experts.get("bytes_read", 0)
            if stats.generated_tokens > 1:
                self.last_decode_tokens_per_second = stats.decode_tokens_per_second

    def record_failure(self) -> None:
        with self._lock:
            self.requests += 1
            self.requests_failed += 1

    def snapshot(self, queue_depth: int, active: int) -> dict[str, float]:
        with self._lock:
            decode_tokens = max(self.generated_tokens - self.requests + self.requests_failed, 0)
            return {
                "requests_total": self.requests,
                "requests_cancelled_total": self.requests_cancelled,
                "requests_failed_total": self.requests_failed,
                "prompt_tokens_total": self.prompt_tokens,
                "prompt_tokens_cached_total": self.cached_tokens,
                "prefill_tokens_total": self.prefill_tokens,
                "generated_tokens_total": self.generated_tokens,
                "prefill_seconds_total": self.prefill_seconds,
                "decode_seconds_total": self.decode_seconds,
                "decode_tokens_per_second": (decode_tokens / self.decode_seconds
                                             if self.decode_seconds else 0.0),
                "last_decode_tokens_per_second": self.last_decode_tokens_per_second,
                "speculative_rounds_total": self.rounds,
                "speculative_round_tokens_total": self.round_tokens,
                "tokens_per_round": self.round_tokens / self.rounds if self.rounds else 0.0,
                "expert_hits_total": self.expert_hits,
                "expert_misses_total": self.expert_misses,
                "expert_bytes_read_total": self.expert_bytes_read,
                "queue_depth": queue_depth,
                "active_requests": active,
            }


_HELP = {
    "requests_total": ("counter", "generation requests handled (finished, cancelled or failed)"),
    "requests_cancelled_total": ("counter", "requests whose client went away before the end"),
    "requests_failed_total": ("counter", "requests that failed in the engine"),
    "prompt_tokens_total": ("counter", "prompt tokens of all requests"),
    "prompt_tokens_cached_total": ("counter", "prompt tokens whose KV cells were reused from a session"),
    "prefill_tokens_total": ("counter", "prompt tokens evaluated"),
    "generated_tokens_total": ("counter", "tokens generated"),
    "prefill_seconds_total": ("counter", "seconds spent evaluating prompts"),
    "decode_seconds_total": ("counter", "seconds spent decoding"),
    "decode_tokens_per_second": ("gauge", "decode rate over all requests (tokens after each first / time)"),
    "last_decode_tokens_per_second": ("gauge", "decode rate of the latest request"),
    "speculative_rounds_total": ("counter", "speculative draft+verify rounds"),
    "speculative_round_tokens_total": ("counter", "tokens committed by speculative rounds"),
    "tokens_per_round": ("gauge", "tokens committed per speculative round"),
    "expert_hits_total": ("counter", "expert uses found resident in the expert store"),
    "expert_misses_total": ("counter", "expert uses that needed a read"),
    "expert_bytes_read_total": ("counter", "bytes the expert store read"),
    "queue_depth": ("gauge", "requests waiting for the decode stream"),
    "active_requests": ("gauge", "requests being decoded (0 or 1)"),
}


def prometheus_text(values: dict[str, float], model: str) -> str:
    label = model.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    lines = []
    for name, value in values.items():
        kind, help_text = _HELP[name]
        full = f"strata_{name}"
        lines += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}",
                  f'{full}{{model="{label}"}} {value:g}']
    return "\n".join(lines) + "\n"
