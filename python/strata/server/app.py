"""The FastAPI application: /v1/models, /v1/completions, /v1/chat/completions (JSON or SSE), /health,
/metrics. Every error is an OpenAI-style body (strata.server.errors); engine work happens on the
worker's decode thread (strata.server.engine), tokenizing on a worker thread of its own so the event
loop (and /health) never waits for either; the body limit and API key are checked in front of the
routes (strata.server.guards)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from strata.errors import StrataError
from strata.server import translate
from strata.server.engine import EngineWorker, Job, Outcome
from strata.server.errors import APIError, install_error_handlers
from strata.server.guards import DEFAULT_MAX_BODY, RequestGuards
from strata.server.metrics import prometheus_text
from strata.server.schemas import ChatCompletionRequest, CompletionRequest, SamplingFields


class ClientGone(Exception):
    """The client disconnected while its request waited or ran."""


class DisconnectWatch:
    """Cancels a job the moment its client disconnects: a task waits on the connection's next ASGI
    message (the body has been read, so the next one is ``http.disconnect``) while the request waits
    for or collects the job's events, so a gone client is noticed between pieces, not only when idle."""

    def __init__(self, job: Job, request: Request) -> None:
        self.job = job
        self.gone = asyncio.Event()
        self._task = asyncio.ensure_future(self._watch(request))

    async def _watch(self, request: Request) -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                self.job.cancel()
                self.gone.set()
                return

    def stop(self) -> None:
        """Stop watching (the streaming response listens for the disconnect itself from here on)."""
        self._task.cancel()


def create_app(worker: EngineWorker, *, max_body: int = DEFAULT_MAX_BODY,
               api_key: str | None = None) -> FastAPI:
    """The app serving one model through ``worker`` (the caller owns the worker and closes it).

    ``max_body``: the largest request body in bytes (413 above it); ``api_key``: when set, every route
    but /health needs ``Authorization: Bearer <api_key>`` (401 otherwise).
    """

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield

    app = FastAPI(title="strata", lifespan=lifespan)
    app.state.worker = worker
    app.state.created = int(time.time())
    install_error_handlers(app)

    @app.exception_handler(ClientGone)
    async def _gone(_request: Request, _exc: ClientGone) -> Response:
        # Nobody reads this answer; handled here so an abandoned request logs no traceback.
        return Response(status_code=499)

    app.add_middleware(RequestGuards, max_body=max_body, api_key=api_key)
    tok = worker.model.tokenizer if worker.model.has_tokenizer else None

    def tokenizer() -> Any:
        if tok is None:
            raise APIError(400, f"the model '{worker.model_id}' has no tokenizer; it cannot serve text",
                           code="model_has_no_tokenizer")
        return tok

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": worker.model_id, "queue_depth": worker.queue_depth}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        values = worker.metrics.snapshot(worker.queue_depth, worker.active)
        return PlainTextResponse(prometheus_text(values, worker.model_id),
                                 media_type="text/plain; version=0.0.4")

    def model_card() -> dict[str, Any]:
        return {"id": worker.model_id, "object": "model", "created": app.state.created, "owned_by": "strata",
                "context_length": worker.context_length}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> dict[str, Any]:
        if model_id != worker.model_id:
            raise APIError(404, f"The model '{model_id}' does not exist", type="not_found_error",
                           param="model", code="model_not_found")
        return model_card()

    @app.post("/v1/completions", response_model=None)
    async def completions(req: CompletionRequest, request: Request) -> JSONResponse | StreamingResponse:
        await common_checks(req)
        # Tokenizing a long prompt takes seconds: a worker thread does it while the loop serves others.
        ids, prompt_text = await anyio.to_thread.run_sync(
            translate.completion_prompt, req, tokenizer(), worker.model.vocab_size)
        translate.check_fits(ids, worker.context_length, "prompt")
        max_tokens = translate.DEFAULT_COMPLETION_TOKENS if req.max_tokens is None else req.max_tokens
        job = worker.submit(ids, max_tokens, translate.stop_list(req), translate.sampling_policy(req))
        rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        echo = prompt_text if req.echo else ""

        def chunk(text: str, finish: str | None) -> dict[str, Any]:
            return {"id": rid, "object": "text_completion", "created": created, "model": worker.model_id,
                    "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]}

        watch = DisconnectWatch(job, request)
        if req.stream:
            first = await first_event(job, watch)
            return SSEResponse(job, sse_events(job, first, chunk, echo, include_usage(req)))
        text, outcome = await collect(job, watch)
        body = chunk(echo + text, outcome.finish_reason or "length")
        body["usage"] = usage(outcome)
        return JSONResponse(body)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(req: ChatCompletionRequest,
                               request: Request) -> JSONResponse | StreamingResponse:
        await common_checks(req)
        ids, extra_stops = await anyio.to_thread.run_sync(translate.chat_prompt, req, tokenizer())
        translate.check_fits(ids, worker.context_length, "messages")
        limit = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        max_tokens = worker.context_length if limit is None else limit
        stops = translate.stop_list(req) + extra_stops
        job = worker.submit(ids, max_tokens, stops, translate.sampling_policy(req))
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

        def chunk(text: str, finish: str | None, role: bool = False) -> dict[str, Any]:
            delta: dict[str, Any] = {} if finish is not None and not text else {"content": text}
            if role:
                delta = {"role": "assistant", "content": text}
            return {"id": rid, "object": "chat.completion.chunk", "created": created,
                    "model": worker.model_id,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        watch = DisconnectWatch(job, request)
        if req.stream:
            first = await first_event(job, watch)
            opening = chunk("", None, role=True)
            return SSEResponse(job, sse_events(job, first, chunk, None, include_usage(req), opening))
        text, outcome = await collect(job, watch)
        return JSONResponse({
            "id": rid, "object": "chat.completion", "created": created, "model": worker.model_id,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": outcome.finish_reason or "length"}],
            "usage": usage(outcome),
        })

    async def common_checks(req: SamplingFields) -> None:
        # A walk over every string (and every token id) of a body of megabytes: off the event loop.
        await anyio.to_thread.run_sync(translate.check_unicode, req)
        translate.check_model(req, worker.model_id)
        translate.check_unsupported(req)

    return app


# --------------------------------------------------------------------------------------- responses
def usage(outcome: Outcome) -> dict[str, Any]:
    return {"prompt_tokens": outcome.prompt_tokens, "completion_tokens": outcome.completion_tokens,
            "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": outcome.cached_tokens}}


def include_usage(req: SamplingFields) -> bool:
    return bool(req.stream_options and req.stream_options.include_usage)


def engine_error(exc: BaseException) -> APIError:
    if isinstance(exc, StrataError) and isinstance(exc, ValueError):
        return APIError(400, str(exc))
    return APIError(500, f"the engine failed: {type(exc).__name__}: {exc}", type="server_error")


async def next_event(job: Job, watch: DisconnectWatch | None) -> tuple[str, Any]:
    """The job's next event; a client that disconnects meanwhile cancels the job (raises ClientGone)."""
    if watch is None:
        return await job.events.get()
    if watch.gone.is_set():
        raise ClientGone
    get = asyncio.ensure_future(job.events.get())
    gone = asyncio.ensure_future(watch.gone.wait())
    try:
        await asyncio.wait((get, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not get.done():
            get.cancel()
    if get.done() and not get.cancelled():
        return get.result()
    raise ClientGone


async def first_event(job: Job, watch: DisconnectWatch) -> tuple[str, Any]:
    """Wait until the job starts producing, so a failure in prefill is still an HTTP error status."""
    try:
        event = await next_event(job, watch)
    except BaseException:
        job.cancel()
        raise
    finally:
        watch.stop()  # from here on the streaming response listens for the disconnect
    if event[0] == "error":
        raise engine_error(event[1])
    return event


async def collect(job: Job, watch: DisconnectWatch) -> tuple[str, Outcome]:
    pieces: list[str] = []
    try:
        while True:
            kind, value = await next_event(job, watch)
            if kind == "piece":
                pieces.append(value)
            elif kind == "end":
                return "".join(pieces), value
            else:
                raise engine_error(value)
    finally:
        watch.stop()
        job.cancel()  # a no-op when the job ended; stops it when this request was abandoned


def sse(data: Any) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def sse_events(job: Job, first: tuple[str, Any], chunk: Callable[..., dict[str, Any]], echo: str | None,
                     with_usage: bool, opening: dict[str, Any] | None = None) -> AsyncIterator[str]:
    if opening is not None:
        yield sse(opening)
    if echo:
        yield sse(chunk(echo, None))
    kind, value = first
    while True:
        if kind == "piece":
            yield sse(chunk(value, None))
        elif kind == "end":
            yield sse(chunk("", value.finish_reason or "length"))
            if with_usage:
                last = chunk("", None)
                last["choices"] = []
                last["usage"] = usage(value)
                yield sse(last)
            break
        else:
            err = engine_error(value)
            yield sse(err.body())
            break
        kind, value = await next_event(job, None)
    yield "data: [DONE]\n\n"


class SSEResponse(StreamingResponse):
    """Server-sent events that stop the job as soon as the client disconnects or the response ends,
    however it ends (the body iterator alone would only notice at its next send)."""

    def __init__(self, job: Job, content: AsyncIterator[str]) -> None:
        super().__init__(content, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.job = job

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:
                async def stream() -> None:
                    try:
                        await self.stream_response(send)
                    except OSError:  # the connection broke while sending
                        pass
                    group.cancel_scope.cancel()

                async def listen() -> None:
                    await self.listen_for_disconnect(receive)
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                group.start_soon(listen)
        finally:
            self.job.cancel()
