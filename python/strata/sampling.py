"""``strata.SamplingPolicy``: how the next token is chosen from the model's logits.

The policy is applied by the C++ core (``sample_dist`` / ``sample_logits`` / ``verify_window``, see
docs/sampling.md), in this order: top-k, repetition and presence penalties over the history,
temperature, min-p, top-p. ``temperature = 0`` is greedy decoding (the argmax after top-k and the
penalties) and draws no random numbers.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from dataclasses import dataclass
from typing import Any

from strata.errors import InvalidArgument

__all__ = ["SamplingPolicy"]

MAX_SEED = 2**64 - 1


@dataclass(frozen=True)
class SamplingPolicy:
    """An immutable, validated sampling policy.

    Attributes:
        temperature: 0 = greedy (deterministic); > 0 samples from softmax(logits / temperature).
        top_k: keep only the k most likely tokens (0 = off).
        top_p: nucleus sampling: keep the smallest set of tokens whose mass reaches top_p (1 = off).
        min_p: drop tokens less likely than min_p times the most likely one (0 = off).
        repetition_penalty: divide positive logits (multiply negative ones) of tokens already in the
            history by this (1 = off; > 1 discourages repeats).
        presence_penalty: subtract this from the logit of every token already in the history (0 = off).
        penalty_last_n: how many of the last history tokens the penalties look at (-1 = all, 0 = none).
        seed: seed of the random generator (None = a fresh random seed per session). Sessions with the
            same seed, prompt and policy produce the same text.

    Example::

        SamplingPolicy(temperature=0.7, top_p=0.95, seed=1)
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    penalty_last_n: int = -1
    seed: int | None = None

    def __post_init__(self) -> None:
        def number(name: str) -> float:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InvalidArgument(f"SamplingPolicy.{name} must be a number, got {v!r}")
            if not math.isfinite(v):
                raise InvalidArgument(f"SamplingPolicy.{name} must be finite, got {v!r}")
            object.__setattr__(self, name, float(v))
            return float(v)

        def integer(name: str) -> int:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise InvalidArgument(f"SamplingPolicy.{name} must be an integer, got {v!r}")
            return v

        if number("temperature") < 0:
            raise InvalidArgument(
                f"SamplingPolicy.temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if integer("top_k") < 0:
            raise InvalidArgument(f"SamplingPolicy.top_k must be >= 0 (0 = off), got {self.top_k}")
        if not 0.0 < number("top_p") <= 1.0:
            raise InvalidArgument(f"SamplingPolicy.top_p must be in (0, 1] (1 = off), got {self.top_p}")
        if not 0.0 <= number("min_p") <= 1.0:
            raise InvalidArgument(f"SamplingPolicy.min_p must be in [0, 1] (0 = off), got {self.min_p}")
        if number("repetition_penalty") <= 0:
            raise InvalidArgument(
                f"SamplingPolicy.repetition_penalty must be > 0 (1 = off), got {self.repetition_penalty}")
        number("presence_penalty")
        if integer("penalty_last_n") < -1:
            raise InvalidArgument(
                f"SamplingPolicy.penalty_last_n must be >= -1 (-1 = all, 0 = none), "
                f"got {self.penalty_last_n}")
        if self.top_k > 2**31 - 1 or self.penalty_last_n > 2**31 - 1:
            raise InvalidArgument("SamplingPolicy.top_k and penalty_last_n must fit in 32 bits")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not 0 <= self.seed <= MAX_SEED):
            raise InvalidArgument(
                f"SamplingPolicy.seed must be None or an integer in [0, 2**64), got {self.seed!r}")
        self.native()  # the C++ validation too (float32 ranges), so a bad policy never reaches a session

    @classmethod
    def recommended(cls, seed: int | None = None) -> SamplingPolicy:
        """The policy the ``strata`` command line samples with unless told otherwise.

        Temperature 0.7, top-k 40, top-p 0.95, min-p 0.05, and a repetition penalty of 1.15 over the
        last 128 tokens: the kind of defaults llama.cpp and ollama ship (they use 1.1 over 64, which
        still let the demo model loop on 3 of 40 seeded runs). Greedy decoding of a small
        model falls into loops (the demo model repeats one line until ``max_tokens``); the window keeps
        the penalty from punishing tokens a long text must reuse (indentation, ``self``, brackets).
        Speculation stays exact under it: the verifier applies the same penalties over the same
        window, row by row (docs/sampling.md). ``SamplingPolicy()`` itself stays greedy, so the
        Python API is deterministic unless asked otherwise.
        """
        return cls(temperature=0.7, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.15,
                   penalty_last_n=128, seed=seed)

    @property
    def greedy(self) -> bool:
        """True when decoding is deterministic (temperature 0)."""
        return self.temperature == 0.0

    def replace(self, **changes: Any) -> SamplingPolicy:
        """A copy with some fields changed (validated like the constructor)."""
        return dataclasses.replace(self, **changes)

    def native(self) -> Any:
        """The policy as ``strata._strata.decode.SamplingPolicy`` (what the C++ sampler takes)."""
        from strata._strata import decode

        return decode.SamplingPolicy(
            temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, min_p=self.min_p,
            repetition_penalty=self.repetition_penalty, presence_penalty=self.presence_penalty,
            penalty_last_n=self.penalty_last_n,
        )

    def resolve_seed(self) -> int:
        """The seed to use: ``seed``, or a fresh random one when it is None."""
        return secrets.randbits(64) if self.seed is None else self.seed
