"""ASGI guards in front of the routes: the request-body size limit (413) and the optional API key (401).

Both act before FastAPI reads or parses anything, so an oversized or unauthorised body costs neither
memory nor a thread. The body limit checks ``Content-Length`` up front and also counts a chunked
body as it arrives (a client may send more than it announced, or announce nothing).
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from strata.errors import InvalidArgument

DEFAULT_MAX_BODY = 4 << 20  # 4 MiB: ~1M tokens of text, far beyond any context strata runs
PUBLIC_PATHS = frozenset({"/health"})  # open without a key, as llama-server leaves /health open
_SIZE_RE = re.compile(r"([0-9]{1,15})\s*([kmg]i?b?|b)?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str, source: str) -> int:
    """Bytes of a size such as ``4194304``, ``512K``, ``4M``, ``1G`` (binary units); ``source`` names
    where the text came from in the error (``--max-body``, ``STRATA_MAX_BODY``)."""
    m = _SIZE_RE.fullmatch(text.strip())
    shown = text if len(text) <= 40 else text[:40] + "…"
    if not m:
        raise InvalidArgument(f"{source}: expected a size in bytes such as 4194304, 512K or 4M, "
                              f"got {shown!r}")
    n = int(m.group(1)) * _UNITS[(m.group(2) or "")[:1].lower()]
    if n < 1024:
        raise InvalidArgument(f"{source}: {shown!r} is below the minimum of 1K")
    return n


def _error(status: int, message: str, code: str) -> tuple[dict[str, Any], bytes]:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": code}}).encode()
    start = {"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    return start, body


async def _respond(send: Send, status: int, message: str, code: str, extra: list[Any] | None = None) -> None:
    start, body = _error(status, message, code)
    if extra:
        start["headers"] = start["headers"] + extra
    await send(start)
    await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


class RequestGuards:
    """Refuses bodies over ``max_body`` bytes (413) and, with ``api_key``, requests without it (401)."""

    def __init__(self, app: ASGIApp, *, max_body: int, api_key: str | None) -> None:
        self.app = app
        self.max_body = max_body
        self.api_key = api_key.encode() if api_key else None

    def _authorised(self, scope: Scope) -> bool:
        if self.api_key is None or scope.get("path") in PUBLIC_PATHS:
            return True
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"")
        if given[:7].lower() == b"bearer ":
            given = given[7:].strip()
        else:
            given = headers.get(b"x-api-key", b"").strip()
        return hmac.compare_digest(given, self.api_key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self._authorised(scope):
            await _respond(send, 401, "Invalid API Key: send 'Authorization: Bearer <key>'",
                           "invalid_api_key", [(b"www-authenticate", b"Bearer")])
            return
        limit = self.max_body
        too_large = (f"the request body is larger than this server's limit of {limit} bytes "
                     "(--max-body / STRATA_MAX_BODY)")
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _respond(send, 413, too_large, "request_too_large")
            return
        received = 0
        refused = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the app's answer to the aborted read is dropped: the 413 is the answer
            started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not refused:
                raise
        if refused and not started:
            await _respond(send, 413, too_large, "request_too_large")
