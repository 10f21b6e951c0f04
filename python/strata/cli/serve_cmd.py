"""``strata serve``: an OpenAI-compatible HTTP server for a model (docs/server.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from strata.cli.options import (
    add_engine_arguments,
    add_model_argument,
    check_speculative,
    config_from,
    load_model,
)
from strata.config import server_env
from strata.errors import InvalidArgument

EPILOG = """\
examples:
  strata serve                                  (the demo model on 127.0.0.1:8080)
  strata serve --model m.gguf --port 9000 --sessions 4
  curl http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' \\
       -d '{"prompt": "def fibonacci(n):", "max_tokens": 64, "temperature": 0}'
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve a model over OpenAI-compatible HTTP",
        description="Serve a model over HTTP: /v1/models, /v1/completions, /v1/chat/completions\n"
        "(streaming with server-sent events or not), /health and /metrics. Requests are queued\n"
        "and decoded one at a time; a repeated prompt prefix reuses cached KV cells.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_argument(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080; 0 = any free)")
    p.add_argument("--sessions", type=int, default=2, metavar="N",
                   help="sessions kept for prefix reuse, each with its own KV cells (default 2)")
    p.add_argument("--max-body", default=None, metavar="SIZE",
                   help="largest request body, bytes or with K/M/G (default 4M, or STRATA_MAX_BODY); "
                   "413 above it")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="require 'Authorization: Bearer KEY' on every route but /health (default: "
                   "STRATA_API_KEY, else no key; prefer the variable: arguments show in ps)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="uvicorn's log level (default info)")
    add_engine_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise InvalidArgument(f"--port must be in [0, 65535], got {args.port}")
    if args.sessions < 1:
        raise InvalidArgument(f"--sessions must be >= 1, got {args.sessions}")
    try:
        import uvicorn

        from strata.server import EngineWorker, create_app
        from strata.server.guards import DEFAULT_MAX_BODY, parse_size
    except ImportError as exc:
        raise InvalidArgument(
            "the server needs fastapi and uvicorn: pip install fastapi uvicorn (or, in the strata source "
            f"tree, pip install '.[server]'); {exc}") from None
    env = server_env()
    max_body = DEFAULT_MAX_BODY
    if args.max_body is not None:
        max_body = parse_size(args.max_body, "--max-body")
    elif "STRATA_MAX_BODY" in env:
        max_body = parse_size(env["STRATA_MAX_BODY"], "STRATA_MAX_BODY")
    api_key = args.api_key if args.api_key is not None else env.get("STRATA_API_KEY")
    if api_key is not None and not api_key.strip():
        raise InvalidArgument("--api-key must not be empty")
    model = load_model(args)
    if not model.has_tokenizer:
        raise InvalidArgument(f"{model.path} has no tokenizer; the server needs one to turn text into tokens")
    config = config_from(args)
    check_speculative(config, model)
    worker = EngineWorker(model, config, sessions=args.sessions)
    key = "API key required" if api_key else "no API key"
    print(f"serving '{worker.model_id}' (context {worker.context_length}) on http://{args.host}:{args.port}"
          f" (body limit {max_body} bytes; {key})", file=sys.stderr)
    try:
        app = create_app(worker, max_body=max_body, api_key=api_key)
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        worker.close()
    return 0
