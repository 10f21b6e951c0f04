"""OpenAI-style error bodies: ``{"error": {"message", "type", "param", "code"}}`` for every failure."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class APIError(Exception):
    """An error the server reports to the client with an HTTP status."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",  # noqa: A002
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message: str, type: str, param: str | None = None,  # noqa: A002
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """The first validation problem as one sentence, and the parameter it concerns."""
    errors = exc.errors()
    if not errors:
        return "invalid request", None
    e = errors[0]
    loc = [str(p) for p in e.get("loc", ()) if p != "body"]
    if e.get("type") == "json_invalid":
        return f"the request body is not valid JSON: {e.get('ctx', {}).get('error', e.get('msg'))}", None
    param = ".".join(loc) or None
    what = e.get("msg", "invalid value")
    if param is None:
        return f"invalid request body: {what}", None
    return f"invalid value for '{param}': {what}", param


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_request: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return JSONResponse(error_body(message, "invalid_request_error", param), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(error_body(str(exc.detail), kind), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _internal(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}: {exc}", "server_error"),
                            status_code=500)
