"""The decode worker: one thread owns every engine call, so requests run one decode stream at a time.

Requests become :class:`Job` s submitted to a single-thread executor (its FIFO is the request queue).
The thread picks a session from a small pool — the one whose tokens share the longest prefix with the
job's prompt, so a repeated prefix reuses its KV cells — replaces that session's context with the
prompt (keeping the common prefix) and streams pieces back to the event loop. A job whose client
went away is marked cancelled; the thread stops at the next piece (or skips the job if it has not
started), which frees the slot for the next request. Sessions are only ever touched by this thread,
so concurrent clients never see each other's tokens.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from strata.config import Config
from strata.model import Model
from strata.sampling import SamplingPolicy
from strata.server.metrics import Metrics
from strata.session import Session


@dataclass
class Outcome:
    """How a job ended."""

    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


@dataclass
class Job:
    """One generation: the full prompt as token ids, and where its pieces go."""

    ids: list[int]
    max_tokens: int
    stops: list[str]
    sampling: SamplingPolicy
    loop: asyncio.AbstractEventLoop
    # ("piece", str) ... then ("end", Outcome) or ("error", BaseException)
    events: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self.cancelled.set()

    def _post(self, kind: str, value: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is closed: the server is shutting down
            pass


class EngineWorker:
    """Owns the model's sessions and the decode thread."""

    def __init__(self, model: Model, config: Config | None = None, *, sessions: int = 2) -> None:
        if sessions < 1:
            raise ValueError(f"sessions must be >= 1, got {sessions}")
        self.model = model
        self.config = config if config is not None else Config()
        self.max_sessions = sessions
        self.model_id = model.name
        self.metrics = Metrics()
        self._pool: list[Session] = []  # most recently used first; decode thread only
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strata-decode")
        self._count_lock = threading.Lock()
        self._queued = 0
        self._active = 0
        # The context every session gets; known before the first session exists.
        self._first = self._new_session()
        self._pool.append(self._first)
        self.context_length = self._first.context_length

    # ------------------------------------------------------------------------------------- public
    @property
    def queue_depth(self) -> int:
        return self._queued

    @property
    def active(self) -> int:
        return self._active

    def submit(self, ids: Sequence[int], max_tokens: int, stops: list[str], sampling: SamplingPolicy) -> Job:
        """Queue a generation; its events arrive on ``job.events`` in the calling event loop."""
        job = Job(list(ids), max_tokens, stops, sampling, asyncio.get_running_loop())
        with self._count_lock:
            self._queued += 1
        self._executor.submit(self._run, job)
        return job

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    # ----------------------------------------------------------------------------- decode thread
    def _new_session(self) -> Session:
        return self.model.session(config=self.config, sampling=SamplingPolicy())

    def _session_for(self, ids: list[int]) -> Session:
        """The pooled session sharing the longest prefix with ids; a new one while the pool has room."""
        def common(s: Session) -> int:
            n = 0
            for a, b in zip(s.tokens, ids, strict=False):
                if a != b:
                    break
                n += 1
            return n

        best = max(self._pool, key=common)
        if common(best) == 0 and len(self._pool) < self.max_sessions:
            best = self._new_session()
        elif common(best) == 0:
            best = self._pool[-1]  # least recently used
        if best in self._pool:
            self._pool.remove(best)
        self._pool.insert(0, best)
        return best

    def _run(self, job: Job) -> None:
        with self._count_lock:
            self._queued -= 1
            self._active += 1
        try:
            self._generate(job)
        finally:
            with self._count_lock:
                self._active -= 1

    def _generate(self, job: Job) -> None:
        if job.cancelled.is_set():
            job._post("end", Outcome(None, len(job.ids), 0, 0))
            return
        try:
            session = self._session_for(job.ids)
            before = _expert_totals(session)
            # Replace the session's context with the prompt, reusing the KV cells of the common prefix
            # (Session.chat does the same with its rendered conversation).
            stream = session._stream(lambda _current: list(job.ids), job.max_tokens, job.stops, job.sampling)
            try:
                for piece in stream:
                    job._post("piece", piece)
                    if job.cancelled.is_set():
                        break
            finally:
                stream.close()  # type: ignore[attr-defined]
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the request
            self.metrics.record_failure()
            job._post("error", exc)
            return
        stats = session.stats
        after = _expert_totals(session)
        cancelled = job.cancelled.is_set() and stats.finish_reason is None
        self.metrics.record(stats, {k: after[k] - before.get(k, 0) for k in after}, cancelled)
        job._post("end", Outcome(stats.finish_reason, stats.prompt_tokens, stats.generated_tokens,
                                 stats.cached_tokens))


def _expert_totals(session: Session) -> dict[str, int]:
    """The expert store's running counters of a session's engine (empty if the engine has none)."""
    try:
        total = session._engine.expert_stats()["total"]
    except (AttributeError, KeyError, TypeError):
        return {}
    return {k: int(total.get(k, 0)) for k in ("hits", "misses", "bytes_read")}
