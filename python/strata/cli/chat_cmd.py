"""``strata chat``: an interactive conversation with a model's chat template.

Each line typed is a user turn; the reply streams back. The conversation is kept (the session reuses
the KV cells of what it already evaluated); ``/reset`` starts over, ``/quit`` (or Ctrl-D) leaves,
Ctrl-C stops a reply. Lines also come from a pipe, one turn per line. At a terminal the line is
edited with readline (arrows, Ctrl-A/E, Ctrl-R) and earlier lines are recalled with Up, also from
earlier chats (the history file).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from strata.cli.options import (
    add_engine_arguments,
    add_max_tokens_argument,
    add_model_argument,
    add_sampling_arguments,
    open_session,
    print_stats,
    write,
)
from strata.errors import InvalidArgument, StrataError

HELP = """commands:
  /reset   forget the conversation (keeps the system prompt)
  /save FILE   save the conversation and session to FILE
  /load FILE   continue the conversation saved in FILE
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
    add_max_tokens_argument(p, 512, " per reply")
    p.add_argument("--stats", action="store_true", help="print speeds and acceptance after each reply")
    p.add_argument("--history", type=Path, default=None, metavar="FILE",
                   help="where the typed lines are kept for Up / Ctrl-R (default "
                   "$XDG_STATE_HOME/strata/chat_history, else ~/.local/state/strata/chat_history)")
    p.add_argument("--no-history", action="store_true", help="keep no history file")
    add_sampling_arguments(p)
    add_engine_arguments(p)
    p.set_defaults(func=run)


HISTORY_LINES = 1000


def default_history_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "strata" / "chat_history"


def enable_line_editing(history: Path | None) -> Any:
    """readline for ``input()`` with the history loaded; returns what saves it (None without readline,
    e.g. on Windows: then input() is plain, the chat still works)."""
    try:
        import readline
    except ImportError:
        return None
    readline.set_history_length(HISTORY_LINES)
    if history is not None:
        try:
            readline.read_history_file(history)
        except OSError:
            pass  # no history yet (or unreadable): start empty

    def save() -> None:
        if history is None:
            return
        try:
            history.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(history)
        except OSError as exc:
            print(f"warning: cannot write the chat history {history}: {exc.strerror or exc}", file=sys.stderr)

    return save


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


def _save_or_load(session: Any, command: str, messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """/save FILE or /load FILE; the messages to continue with. Errors are printed, the chat goes on."""
    verb, _, path = command.partition(" ")
    path = path.strip()
    if not path:
        print(f"usage: {verb} FILE", file=sys.stderr)
        return messages
    try:
        if verb == "/save":
            session.save(path, extra={"chat_messages": messages})
            print(f"(saved to {path})", file=sys.stderr)
            return messages
        extra = session.load(path)
    except StrataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return messages
    loaded = extra.get("chat_messages")
    ok = isinstance(loaded, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in loaded)
    print(f"(loaded {path}: {len(loaded) if ok else 0} messages)", file=sys.stderr)  # type: ignore[arg-type]
    return [dict(m) for m in loaded] if ok else []  # type: ignore[union-attr]


def run(args: argparse.Namespace) -> int:
    if args.max_tokens < 1:
        raise InvalidArgument(f"--max-tokens must be >= 1, got {args.max_tokens}")
    session = open_session(args)
    interactive = sys.stdin.isatty()
    start: list[dict[str, str]] = [] if args.system is None else [{"role": "system", "content": args.system}]
    save_history = None
    if interactive:
        history = None if args.no_history else (args.history or default_history_path())
        save_history = enable_line_editing(history)
        print(f"chatting with {session.model.name} — /help for commands, /quit to leave", file=sys.stderr)
        if session.model.path.endswith("strata-demo.gguf"):
            print("(the demo model is a small code-completion model trained on Python source, not a chat "
                  "model: expect code, not answers; `strata generate` suits it better)", file=sys.stderr)
    try:
        return _converse(args, session, interactive, start)
    finally:
        if save_history is not None:
            save_history()


def _converse(args: argparse.Namespace, session: Any, interactive: bool, start: list[dict[str, str]]) -> int:
    messages = list(start)
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
        if not command:
            continue
        if command == "/help":
            print(HELP, file=sys.stderr)
            continue
        if command == "/reset":
            messages = list(start)
            session.reset()
            print("(conversation cleared)", file=sys.stderr)
            continue
        if command.split(maxsplit=1)[0] in ("/save", "/load"):
            messages = _save_or_load(session, command, messages)
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
            print_stats(session)
