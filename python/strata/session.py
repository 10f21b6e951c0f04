"""``strata.Session``: one conversation with a model — its tokens, KV cells, sampler history and RNG.

A session owns its own native engine (``strata._strata.Engine``, on the config's backend): KV cells of
the main model and the MTP drafter for ``Config.context_length`` tokens. Calls continue the session:
``generate`` appends the prompt to what is already there, ``chat`` renders the whole conversation and
reuses the KV cells of the longest common token prefix (so a multi-turn chat only evaluates the new
turn). ``reset()`` empties it.

Decoding (SPEC §2.8):

- every round runs in the engine (``Engine.spec_round``, C++ ``draft::Speculator``); each token is
  chosen by the C++ sampler under the :class:`SamplingPolicy`, with the penalties over every token in
  the session; temperature 0 is greedy;
- with speculation on (``Config.speculative``; default: when the model has an MTP layer) every round
  drafts up to ``Config.draft_steps`` tokens with the MTP drafter — chained or not
  (``Config.draft_chained``) — keeps what the retention settings allow (R-3), evaluates the pending
  token and the drafts in ONE window of k+1 rows, and keeps what the verifier accepts: greedy
  verification at temperature 0 (the output is identical to plain decoding), exact speculative
  sampling at temperature > 0 (the output distribution is the model's; the random stream differs from
  plain decoding, so seeded outputs differ between the two modes).

A session is safe to share between threads (one step runs at a time) but it is one conversation:
starting a new ``generate``/``chat`` makes any unfinished iterator of the same session invalid.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from strata._strata import decode
from strata.config import Config
from strata.errors import ConfigError, FormatError, InvalidArgument
from strata.native_engine import open_engine
from strata.sampling import SamplingPolicy
from strata.session_file import SessionState, model_fingerprint, read_session_file, write_session_file
from strata.spec_cost_cache import measured_run, seed_entry
from strata.stats import GenerationStats

if TYPE_CHECKING:
    from strata.tokenizer import Tokenizer

__all__ = ["Session", "SessionModel"]

Prompt = str | Sequence[int]


class SessionModel(Protocol):
    """What a session needs of its model (``strata.Model`` is one); kept as a protocol so this module
    does not import ``strata.model``, which imports it."""

    @property
    def path(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def has_mtp(self) -> bool: ...
    @property
    def mtp_model(self) -> str: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def tokenizer(self) -> Tokenizer: ...
    @property
    def adaptive_costs(self) -> dict[str, dict[str, Any]]:
        """Adaptive speculation's latest measured costs per ``repr(Config)`` (shared by the sessions)."""
        ...
    def save_adaptive_costs(self, config_key: str) -> None:
        """Keep the costs of ``config_key`` beyond this process (the cost cache; may do nothing)."""
        ...


class Session:
    """A generation session; make one with :meth:`strata.Model.session`."""

    def __init__(self, model: SessionModel, config: Config, sampling: SamplingPolicy) -> None:
        if not isinstance(config, Config):
            raise InvalidArgument(f"config must be a strata.Config, got {type(config).__name__}")
        if not isinstance(sampling, SamplingPolicy):
            raise InvalidArgument(f"sampling must be a strata.SamplingPolicy, got {type(sampling).__name__}")
        if config.speculative and not model.has_mtp:
            raise ConfigError(f"Config.speculative is on but {model.path} has no MTP layer to draft with; "
                              "use speculative=None (auto) or False")
        self._model = model
        self._config = config
        self._sampling = sampling
        self._speculative = model.has_mtp if config.speculative is None else config.speculative
        # auto: each round verifies as many drafts as the measured costs say pay (draft/adaptive.h)
        self._adaptive = self._speculative and config.speculative is None
        self._engine: Any = open_engine(model.path, config, has_mtp=model.has_mtp,
                                        encode_mtp=self._speculative, mtp_model=model.mtp_model)
        # Costs an earlier session measured with the same settings: where they say drafting cannot
        # pay, this session skips the probe's drafts (docs/drafting.md, "Seeded sessions").
        self._costs_key = repr(config)
        prior = model.adaptive_costs.get(self._costs_key) if self._adaptive else None
        # The runs before this session's: its own measured costs go in front of them (seed_entry).
        self._cost_runs_before: list[dict[str, Any]] = []
        if prior is not None:
            self._engine.spec_adaptive_seed(prior.get("seed", prior))
            self._cost_runs_before = list(prior["runs"]) if "runs" in prior else [measured_run(prior)]
        self._n_ctx = int(self._engine.max_ctx)
        self._seed = sampling.resolve_seed()
        self._rng = decode.Rng(self._seed)
        self._tokens: list[int] = []
        self._stats = self._new_stats()
        self._lock = threading.RLock()
        # The latest generate/chat call: a later call, reset() or load() replaces it, which supersedes it
        # (its expert counters are read when stats are asked for while it runs).
        self._current: _Run | None = None

    # ----------------------------------------------------------------------------------- properties
    @property
    def model(self) -> SessionModel:
        return self._model

    @property
    def config(self) -> Config:
        return self._config

    @property
    def sampling(self) -> SamplingPolicy:
        return self._sampling

    @property
    def seed(self) -> int:
        """The seed the session's RNG started from (``sampling.seed`` or the random one drawn for it)."""
        return self._seed

    @property
    def speculative(self) -> bool:
        """Whether this session decodes speculatively with the MTP drafter."""
        return self._speculative

    @property
    def tokens(self) -> tuple[int, ...]:
        """Every token in the session: prompts and generated tokens, in order."""
        with self._lock:
            return tuple(self._tokens)

    @property
    def context_length(self) -> int:
        """How many tokens the session can hold (its KV cells)."""
        return self._n_ctx

    @property
    def stats(self) -> GenerationStats:
        """Counters and timings of the latest ``generate``/``chat`` call (updated while it streams)."""
        run = self._current
        if run is not None and not run.done:
            # The expert-store counters of a call still running are read here, not after every round:
            # after a round the interpreter's code and data are out of the caches, and reading them
            # took ~17 us of a 0.65 ms step on the demo model.
            with self._lock:
                if self._current is run and not run.done:
                    run.record_experts()
                    run.record_costs()
        return self._stats

    def __repr__(self) -> str:
        return (f"Session(model={self._model.name!r}, tokens={len(self._tokens)}/{self._n_ctx}, "
                f"speculative={self._speculative})")

    # ---------------------------------------------------------------------------------- lifecycle
    def reset(self) -> None:
        """Forget everything: tokens, KV and MTP cells (the drafter's too: ``rollback(0)`` invalidates every
        MTP cell), stats; the RNG restarts from the session's seed. A reset session repeats a fresh one."""
        with self._lock:
            self._current = None
            self._tokens = []
            self._engine.rollback(0)
            self._rng.reseed(self._seed)
            self._stats = self._new_stats()

    def _new_stats(self) -> GenerationStats:
        # kv_type: what Config.kv_type auto resolved to, read from the engine (once per call).
        return GenerationStats(speculative=self._speculative, adaptive=self._adaptive,
                               kv_type=str(self._engine.hparams["kv_type"]))

    # ------------------------------------------------------------------------------- save / load
    def save(self, path: str | os.PathLike[str], *, extra: Mapping[str, Any] | None = None) -> None:
        """Write the session to ``path`` (docs/sessions.md): tokens, how many of them the KV cells hold,
        seed and RNG state, sampling policy, config and stats, tied to this model's fingerprint,
        checksummed and written atomically (a failed write leaves an existing file as it was).
        ``extra`` is any JSON-ready mapping stored alongside (``chat`` keeps its messages there);
        :meth:`load` returns it. Saving between the pieces of an unfinished generation is fine: the
        session is consistent after every piece, and that generation can go on afterwards."""
        if extra is not None and not isinstance(extra, Mapping):
            raise InvalidArgument(f"extra must be a mapping, got {type(extra).__name__}")
        fingerprint = model_fingerprint(self._model.path)
        with self._lock:
            state = SessionState(
                tokens=list(self._tokens),
                n_past=int(self._engine.n_past),
                seed=self._seed,
                rng_state=tuple(int(w) for w in self._rng.state()),  # type: ignore[arg-type]
                sampling=dataclasses.asdict(self._sampling),
                config=dataclasses.asdict(self._config),
                stats=dataclasses.asdict(self._stats),
                model_name=self._model.name,
                extra=dict(extra or {}),
            )
        write_session_file(path, fingerprint, state)

    def load(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Replace this session with the one saved in ``path`` and return the ``extra`` saved with it.

        The file must have been made for this model (same fingerprint). The loaded session continues
        exactly as the saved one would have: same tokens, the same KV and MTP cells (rebuilt by
        evaluating the saved tokens again, bitwise equal to the originals — docs/sessions.md), the same
        RNG state, seed, sampling policy and config (except ``threads``, which stays this session's:
        results do not depend on it). Everything is read, checked and rebuilt in a new session first;
        only then is it swapped in, so a refused file (``FormatError`` naming the file and the problem)
        or any other error leaves this session untouched. An unfinished generation is superseded.
        """
        state = read_session_file(path, model_fingerprint(self._model.path), self._model.name)
        name = os.fspath(path)
        fresh = self._restored(state, name)
        with self._lock:
            self._current = None
            for attr in ("_config", "_sampling", "_speculative", "_engine", "_n_ctx", "_seed", "_rng",
                         "_tokens", "_stats", "_adaptive"):
                setattr(self, attr, getattr(fresh, attr))
        return dict(state.extra)

    def _restored(self, state: SessionState, name: str) -> Session:
        """A new session holding `state` (checked against this model), built without touching self."""
        try:
            config = Config(**_known_fields(Config, state.config, tuple_lists=True)).replace(
                threads=self._config.threads)
            sampling = SamplingPolicy(**_known_fields(SamplingPolicy, state.sampling))
            stats = GenerationStats(**_known_fields(GenerationStats, state.stats))
        except (TypeError, ValueError) as exc:  # ConfigError and InvalidArgument are ValueErrors
            raise FormatError(f"{name}: the saved settings are invalid: {exc}") from None
        vocab = self._model.vocab_size
        bad = next((t for t in state.tokens if t >= vocab), None)
        if bad is not None:
            raise FormatError(f"{name}: token id {bad} is outside this model's vocabulary [0, {vocab})")
        try:  # a setting valid on its own can still be refused for this model (speculation without MTP)
            fresh = Session(self._model, config, sampling)
        except (TypeError, ValueError) as exc:
            raise FormatError(f"{name}: the saved settings cannot be used with this model: {exc}") from None
        if len(state.tokens) >= fresh._n_ctx or state.n_past >= fresh._n_ctx:
            raise FormatError(f"{name}: the session holds {len(state.tokens)} tokens, more than its context "
                              f"of {fresh._n_ctx} cells can continue from")
        if state.n_past > 0:  # prefill is bitwise independent of chunking: these are the saved cells
            fresh._engine.eval(state.tokens[: state.n_past], start_pos=0, logits="none")
        fresh._tokens = list(state.tokens)
        fresh._seed = state.seed
        fresh._rng.set_state(list(state.rng_state))
        fresh._stats = stats
        return fresh

    # --------------------------------------------------------------------------------- generation
    def generate(
        self,
        prompt: Prompt = "",
        *,
        max_tokens: int = 256,
        stop: str | Sequence[str] | None = None,
        sampling: SamplingPolicy | None = None,
    ) -> Iterator[str]:
        """Continue the session with ``prompt`` and stream the generated text.

        Args:
            prompt: text (tokenized with the model's tokenizer; BOS is added when the model asks for it
                and the session is empty) or token ids. ``""`` continues from what the session holds;
                in an empty session it starts from BOS (or EOS, the document separator, without BOS).
            max_tokens: at most this many tokens are generated (0 only evaluates the prompt).
            stop: a string or strings that end generation; the text before the first occurrence is
                returned, the stop string itself is not.
            sampling: a policy for this call only (default: the session's). When it has a seed, the RNG
                restarts from that seed.

        Returns:
            An iterator of text pieces (UTF-8 characters are never split); ``"".join(...)`` is the
            generated text. Generation runs as the iterator is consumed. ``session.stats`` tells why it
            stopped (``finish_reason``).
        """
        tok = self._model.tokenizer
        new = self._prompt_ids(prompt, tok)
        return self._stream(lambda current: self._continuation(current, new, tok), max_tokens, stop, sampling)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int = 512,
        stop: str | Sequence[str] | None = None,
        sampling: SamplingPolicy | None = None,
        **template_args: Any,
    ) -> Iterator[str]:
        """Stream the assistant's reply to ``messages`` (``[{"role": ..., "content": ...}, ...]``).

        The conversation is rendered with the model's chat template (ChatML when the file has none) and
        replaces the session's context; the KV cells of the longest common token prefix are reused, so
        passing the growing message list turn after turn evaluates only the new turn. Generation stops
        at the template's end-of-turn token. ``template_args`` go to the template (e.g.
        ``enable_thinking=False``). Other arguments as for :meth:`generate`.
        """
        tok = self._model.tokenizer
        text = tok.apply_chat_template(messages, add_generation_prompt=True, **template_args)
        ids = tok.encode(text, add_special=True, parse_special=True)
        if tok.bos_id is not None and len(ids) >= 2 and ids[0] == ids[1] == tok.bos_id:
            ids = ids[1:]  # the template wrote BOS itself
        stops = _stop_list(stop)
        if tok.chat_template is None and tok.token_to_id("<|im_end|>") is None:
            stops.append("<|im_end|>")  # ChatML rendered for a vocabulary without its end-of-turn token
        return self._stream(lambda _current: list(ids), max_tokens, stops, sampling)

    # ----------------------------------------------------------------------------- internals: prompt
    def _prompt_ids(self, prompt: Prompt, tok: Tokenizer) -> list[int]:
        if isinstance(prompt, str):
            return [] if prompt == "" else tok.encode(prompt, add_special=False, parse_special=True)
        if isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, Sequence):
            raise InvalidArgument(
                f"prompt must be a str or a sequence of token ids, got {type(prompt).__name__}")
        ids = []
        vocab = self._model.vocab_size
        for i, t in enumerate(prompt):
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= int(t) < vocab:
                raise InvalidArgument(f"prompt[{i}] = {t!r} is not a token id in [0, {vocab})")
            ids.append(int(t))
        return ids

    def _continuation(self, current: list[int], new: list[int], tok: Tokenizer) -> list[int]:
        if current:
            return current + new
        start: list[int] = []
        if tok.add_bos and tok.bos_id is not None:
            start = [tok.bos_id]
        elif not new:
            first = tok.bos_id if tok.bos_id is not None else tok.eos_id
            if first is None:
                raise InvalidArgument("the prompt is empty and the session holds no tokens; give a prompt "
                                      "(this model has no BOS or EOS token to start from)")
            start = [first]
        return start + new

    # --------------------------------------------------------------------------- internals: decoding
    def _stream(
        self,
        build_target: Callable[[list[int]], list[int]],
        max_tokens: int,
        stop: str | Sequence[str] | None,
        sampling: SamplingPolicy | None,
    ) -> Iterator[str]:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
            raise InvalidArgument(f"max_tokens must be an integer >= 0, got {max_tokens!r}")
        if sampling is not None and not isinstance(sampling, SamplingPolicy):
            raise InvalidArgument(f"sampling must be a strata.SamplingPolicy, got {type(sampling).__name__}")
        stops = _stop_list(stop)
        policy = self._sampling if sampling is None else sampling
        return self._run(build_target, max_tokens, stops, policy, reseed=sampling is not None)

    def _run(
        self,
        build_target: Callable[[list[int]], list[int]],
        max_tokens: int,
        stops: list[str],
        policy: SamplingPolicy,
        reseed: bool,
    ) -> Iterator[str]:
        with self._lock:
            self._current = None  # supersedes the call before, even if this one fails to start
            run = self._current = _Run(self, policy, max_tokens, stops)
            if reseed and policy.seed is not None:
                self._rng.reseed(policy.seed)
            pieces = run.prefill(build_target(list(self._tokens)))
        yield from pieces
        try:
            while not run.done:
                with self._lock:
                    if self._current is not run:
                        raise InvalidArgument("this generation was superseded by a later generate(), chat() "
                                              "or reset() on the same session")
                    pieces = run.step()
                yield from pieces
        except GeneratorExit:
            # The caller stopped reading: what the call's rounds measured still seeds later sessions.
            with self._lock:
                if self._current is run and not run.done:
                    run.record_costs()
            raise


class _Run:
    """The state of one generate/chat call; every method runs under the session's lock and leaves the
    session consistent (tokens and engine agree) when it returns."""

    def __init__(self, session: Session, policy: SamplingPolicy, max_tokens: int, stops: list[str]) -> None:
        # The session keeps its latest run (Session._current) and the run reaches the session through a
        # weak proxy: a strong reference both ways would be a cycle that only the cyclic garbage collector
        # frees, so a dropped session's engine (weights, expert store, K/V: gigabytes on a big model)
        # would outlive it until a collection happens to run.
        self.s: Session = weakref.proxy(session)
        self.engine = session._engine
        self.policy = policy.native()
        self.penalized = policy.repetition_penalty != 1.0 or policy.presence_penalty != 0.0
        self.penalty_last_n = policy.penalty_last_n
        self.max_tokens = max_tokens
        tok = session._model.tokenizer
        self.eog = tok.eog_ids
        self.text = _TextStream(tok, stops)
        self.stats = session._new_stats()
        session._stats = self.stats
        self.done = False
        # Expert-store counters of this call: snapshots of the engine's running totals.
        self.expert_mode = session._config.expert_mode
        self.experts_start = self.engine.expert_totals()
        self.experts_after_prefill: dict[str, Any] | None = None
        self.cuts_start = int(self.engine.spec_window_cuts())
        # Read once per call, not per step (a step is ~0.5 ms on the demo model; each lookup is overhead).
        self.draft_steps = session._config.draft_steps if session._speculative else 0
        self.chained = session._config.draft_chained

    # ------------------------------------------------------------------------------------ helpers
    def history(self) -> list[int]:
        """What the penalties look at (nothing when they are off)."""
        toks = self.s._tokens
        if not self.penalized or self.penalty_last_n == 0:
            return []
        return toks if self.penalty_last_n < 0 else toks[-self.penalty_last_n :]

    def sample(self, logits: np.ndarray) -> int:
        return int(decode.sample_logits(logits, self.policy, self.history(), [], self.s._rng))

    def record_costs(self) -> None:
        """The engine's measured speculation costs (adaptive only): into the stats, and as the seed of this
        model's later sessions (and, when the call ends, of later processes)."""
        s = self.s
        if not (s._speculative and s._adaptive):
            return
        costs = self.engine.spec_adaptive_stats()
        self.stats.record_adaptive(costs)
        s._model.adaptive_costs[s._costs_key] = seed_entry(costs, s._cost_runs_before)

    def record_experts(self) -> None:
        now = self.engine.expert_totals()
        self.stats.record_experts(self.experts_start, now, self.experts_after_prefill, self.expert_mode)

    def finish(self, reason: str, out: list[str], flush: bool = True) -> None:
        if flush:
            tail = self.text.finish()
            if tail:
                out.append(tail)
        self.stats.finish_reason = reason
        self.done = True
        eng, n = self.engine, len(self.s._tokens)
        if eng.n_past > n:  # a stop inside a verified window: drop the cells of the discarded tokens
            eng.rollback(n)

    def emit(self, tokens: Sequence[int], out: list[str]) -> None:
        """Append tokens one by one, stopping at the first end condition."""
        s = self.s
        for t in tokens:
            s._tokens.append(t)
            self.stats.generated_tokens += 1
            piece, hit = self.text.push(t)
            if piece:
                out.append(piece)
            if hit:
                return self.finish("stop", out, flush=False)
            if t in self.eog:
                return self.finish("stop", out)
            if self.stats.generated_tokens >= self.max_tokens or len(s._tokens) >= s._n_ctx:
                return self.finish("length", out)
        return None

    # ------------------------------------------------------------------------------------ prefill
    def prefill(self, target: list[int]) -> list[str]:
        s, eng = self.s, self.engine
        if not target:
            raise InvalidArgument("nothing to evaluate: the prompt is empty")
        if len(target) >= s._n_ctx:
            raise InvalidArgument(
                f"the prompt needs {len(target)} tokens (with what the session already holds) but the "
                f"session holds at most {s._n_ctx - 1} before generating; shorten it, call reset(), or "
                "create the session with a larger Config(context_length=...)")
        t0 = time.perf_counter()
        # The prefix-reuse decision (longest common prefix, drafter cells a later draft row reads) is
        # the engine's (engine/sequence.h).
        start = int(eng.reuse_prefix(s._tokens, target, s._speculative))
        if start < eng.n_past:
            eng.rollback(start)
        s._tokens = target[:start]
        try:
            logits = eng.eval(target[start:], start_pos=start, logits="last")
        except BaseException:
            eng.rollback(min(int(eng.n_past), start))
            raise
        s._tokens = list(target)
        self.stats.prompt_tokens = len(target)
        self.stats.cached_tokens = start
        self.stats.prefill_tokens = len(target) - start
        self.record_experts()
        self.experts_after_prefill = self.engine.expert_totals()
        out: list[str] = []
        if self.max_tokens == 0:
            self.finish("length", out)
        else:
            t = self.sample(logits)
            self.emit([t], out)
        t1 = time.perf_counter()
        self.stats.prefill_seconds = t1 - t0
        self.t_decode = t1
        return out

    # ------------------------------------------------------------------------------------- decode
    def step(self) -> list[str]:
        """One decode round in the engine (``spec_round``, draft/speculator.h): with speculation, draft up
        to ``draft_steps`` tokens, keep what retention allows (R-3), verify them with the pending token as
        one window and commit what the verifier accepts (R-12); without, or when no draft is kept, a
        plain step."""
        s, stats = self.s, self.stats
        out: list[str] = []
        k = 0
        if self.draft_steps:
            k = max(0, min(self.draft_steps, self.max_tokens - stats.generated_tokens - 1))
        tokens, drafted, verified, accepted, _probs = self.engine.spec_round(
            s._tokens[-1], self.history(), k, self.chained, policy=self.policy, rng=s._rng,
            adaptive=s._adaptive)
        before = stats.generated_tokens
        self.emit(tokens, out)
        if verified:
            stats.record_round(verified, accepted, stats.generated_tokens - before)
        if drafted:  # only a drafting round can cut: plain stretches make no extra call
            stats.window_cut_drafts = int(self.engine.spec_window_cuts()) - self.cuts_start
        if s._speculative:
            stats.record_step(verified)
        stats.steps += 1
        stats.decode_seconds = time.perf_counter() - self.t_decode
        if self.done:
            # Outside the timed decode, once per call (while it runs, Session.stats takes them when read;
            # snapshots of the costs every 32 rounds cost ~1 ms of a 256-token call on the demo model).
            self.record_experts()
            self.record_costs()
            if s._adaptive:  # the costs for the next process
                s._model.save_adaptive_costs(s._costs_key)
        return out


class _TextStream:
    """Token ids -> text pieces, holding back what could be the start of a stop string."""

    def __init__(self, tokenizer: Tokenizer, stops: list[str]) -> None:
        self.decoder = tokenizer.stream_decoder()
        self.stops = stops
        self.held = ""

    def push(self, token: int) -> tuple[str, bool]:
        """(text that can be emitted now, whether a stop string was reached)."""
        return self._scan(self.held + self.decoder.push(token))

    def finish(self) -> str:
        text, _ = self._scan(self.held + self.decoder.flush(), final=True)
        return text

    def _scan(self, text: str, final: bool = False) -> tuple[str, bool]:
        if not self.stops:
            self.held = ""
            return text, False
        hits = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.held = ""
            return text[: min(hits)], True
        keep = 0
        if not final:
            for k in range(min(len(text), max(len(s) for s in self.stops) - 1), 0, -1):
                if any(s.startswith(text[-k:]) for s in self.stops):
                    keep = k
                    break
        self.held = text[len(text) - keep :]
        return text[: len(text) - keep], False


def _known_fields(cls: type, saved: Mapping[str, Any], tuple_lists: bool = False) -> dict[str, Any]:
    """The saved values of the dataclass fields `cls` has (newer fields keep their defaults)."""
    names = {f.name for f in dataclasses.fields(cls)}
    out = {}
    for k, v in saved.items():
        if k in names:
            out[k] = tuple(v) if tuple_lists and isinstance(v, list) else v
    return out


def _stop_list(stop: str | Sequence[str] | None) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else list(stop)
    for i, s in enumerate(stops):
        if not isinstance(s, str) or not s:
            raise InvalidArgument(f"stop[{i}] must be a non-empty string, got {s!r}")
    return stops
