"""``python -m strata.cli chat``: an interactive conversation with a model's chat template.

Each line typed is a user turn; the reply streams back. The conversation is kept (the session reuses
the KV cells of what it already evaluated); ``/reset`` starts over, ``/quit`` (or Ctrl-D) leaves,
Ctrl-C stops a reply. Lines also come from a pipe, one turn per line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from strata.cli.generate_cmd import (
    add_engine_arguments,
    add_model_argument,
    add_sampling_arguments,
    open_session,
    write,
)
from strata.errors import InvalidArgument

HELP = """commands:
  /reset   forget the conversation (keeps the system prompt)
  /quit    leave (also /exit or Ctrl-D)
  /help    this text
Ctrl-C stops the reply being generated."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "chat",
        help="talk to a model interactively (its chat template, kept history)",
        description="An interactive chat: each line you type is a user message, the model's reply\n"
        "streams back, and the conversation is kept until /reset. Uses the model's chat template\n"
        "(ChatML when the file has none). Without --model the shipped demo model is used.",
        epilog=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_argument(p)
    p.add_argument("--system", default=None, metavar="TEXT",
                   help="a system message that starts the conversation")
    p.add_argument("--max-tokens", type=int, default=512, metavar="N",
                   help="at most N tokens per reply (default 512)")
    p.add_argument("--stats", action="store_true", help="print speeds and acceptance after each reply")
    add_sampling_arguments(p)
    add_engine_arguments(p)
    p.set_defaults(func=run)


def _read_line(interactive: bool) -> str | None:
    """The next user line; None at end of input."""
    if interactive:
        try:
            return input("> ")
        except EOFError:
            print(file=sys.stderr)
            return None
    line = sys.stdin.readline()
    return None if line == "" else line.rstrip("\n")


def run(args: argparse.Namespace) -> int:
    if args.max_tokens < 1:
        raise InvalidArgument(f"--max-tokens must be >= 1, got {args.max_tokens}")
    session = open_session(args)
    interactive = sys.stdin.isatty()
    start: list[dict[str, str]] = [] if args.system is None else [{"role": "system", "content": args.system}]
    messages = list(start)
    if interactive:
        print(f"chatting with {session.model.name} — /help for commands, /quit to leave", file=sys.stderr)
    while True:
        try:
            line = _read_line(interactive)
        except KeyboardInterrupt:
            print(file=sys.stderr)
            return 0
        if line is None:
            return 0
        command = line.strip()
        if command in ("/quit", "/exit"):
            return 0
        if command == "/help":
            print(HELP, file=sys.stderr)
            continue
        if command == "/reset":
            messages = list(start)
            session.reset()
            print("(conversation cleared)", file=sys.stderr)
            continue
        if not command:
            continue
        if command.startswith("/"):
            print(f"unknown command {command.split()[0]}; /help lists them", file=sys.stderr)
            continue
        messages.append({"role": "user", "content": line})
        reply: list[str] = []
        try:
            for piece in session.chat(messages, max_tokens=args.max_tokens):
                reply.append(piece)
                write(sys.stdout, piece)
        except KeyboardInterrupt:
            print(" [stopped]", file=sys.stderr)
        text = "".join(reply)
        write(sys.stdout, "\n" if not text.endswith("\n") else "")
        messages.append({"role": "assistant", "content": text})
        if args.stats:
            print(session.stats.summary(), file=sys.stderr)
