"""Chat templates (Jinja, from a GGUF's ``tokenizer.chat_template``) compiled and rendered in a bounded
sandbox.

A template comes from a model file, so it is untrusted code. It compiles in jinja2's immutable
sandbox, as transformers does (no attribute access to internals, no mutation of the messages), and
each render is bounded in time (:data:`RENDER_SECONDS`) and in output size
(:func:`output_limit`): a runaway template ("for i in range(100000)" nested twice) stops with an error
that says which limit it hit instead of running for minutes and gigabytes. The deadline is checked on
every piece of output, every loop step over ``range``, every call, attribute or item lookup; the
operators ``*``, ``**`` and ``+`` refuse results over the size limit before computing them.

Not bounded: a single string ``~`` concatenation inside a loop grows between checks (each loop step
still checks the deadline and the output size).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from strata.errors import FormatError, InvalidArgument

__all__ = ["RENDER_SECONDS", "compile_chat_template", "output_limit", "render_chat_template"]

RENDER_SECONDS = 2.0  # real templates render in well under a millisecond
_MIN_OUTPUT = 1 << 20  # characters; a rendered chat is its messages plus a little markup
_OUTPUT_PER_INPUT = 4
_RANGE_CHECK_EVERY = 256
_MAX_POWER_BITS = 1 << 16  # x ** y results up to ~20 000 digits
_KEY = "tokenizer.chat_template"


class TemplateLimit(Exception):
    """A render went past its time or size limit."""


_state = threading.local()  # the deadline and size limit of the render running on this thread


def _check_deadline() -> None:
    deadline = getattr(_state, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise TemplateLimit(f"it ran longer than {RENDER_SECONDS:g} s (a runaway loop?)")


def _check_size(n: int) -> None:
    limit = getattr(_state, "max_chars", None)
    if limit is not None and n > limit:
        raise TemplateLimit(f"it would produce more than {limit} characters")


def output_limit(messages: Sequence[Mapping[str, Any]]) -> int:
    """The most characters a render of ``messages`` may produce: 4 × their text, at least 1 Mi."""
    chars = sum(len(str(v)) for m in messages for v in m.values())
    return max(_MIN_OUTPUT, _OUTPUT_PER_INPUT * chars)


def _limited_range(*args: int) -> Iterator[int]:
    from jinja2.sandbox import safe_range  # the sandbox's own limit of 100000 items per range

    r = safe_range(*args)
    for i, v in enumerate(r):
        if i % _RANGE_CHECK_EVERY == 0:
            _check_deadline()
        yield v


def _sized(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


def compile_chat_template(template: str) -> Any:
    """Compile a chat template the way transformers does (sandboxed, trim_blocks, loop controls), in an
    environment that enforces the render limits. ``ImportError`` when jinja2 is missing."""
    import jinja2  # optional dependency: ImportError means "use the ChatML fallback"
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class LimitedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "+"})

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            _check_deadline()
            return super().call(__context, __obj, *args, **kwargs)

        def getattr(self, obj: Any, attribute: str) -> Any:
            _check_deadline()
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            _check_deadline()
            return super().getitem(obj, argument)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _check_deadline()
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if _sized(seq) and isinstance(n, int):
                        _check_size(_sized(seq) * n)
            elif operator == "+":
                _check_size(_sized(left) + _sized(right))
            elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
                if left.bit_length() * right > _MAX_POWER_BITS:  # a way to hang, not a chat
                    raise TemplateLimit(f"a power of {left.bit_length() * right} bits is too large")
            return super().call_binop(context, operator, left, right)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        from datetime import datetime

        return datetime.now().strftime(fmt)

    env = LimitedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["range"] = _limited_range
    try:
        return env.from_string(template)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise FormatError(f"{_KEY}: not a valid Jinja template: {e}") from e


def render_chat_template(compiled: Any, context: dict[str, Any], max_chars: int) -> str:
    """Render within :data:`RENDER_SECONDS` and ``max_chars`` characters; ``InvalidArgument`` saying
    why when the template fails or goes past a limit."""
    _state.deadline = time.monotonic() + RENDER_SECONDS
    _state.max_chars = max_chars
    pieces: list[str] = []
    total = 0
    try:
        for piece in compiled.generate(**context):
            total += len(piece)
            _check_size(total)
            _check_deadline()
            pieces.append(piece)
    except TemplateLimit as e:
        raise InvalidArgument(f"chat template stopped: {e}") from None
    except RecursionError:
        raise InvalidArgument("chat template failed: it recursed too deeply") from None
    except MemoryError:
        raise InvalidArgument("chat template failed: it ran out of memory") from None
    except Exception as e:  # jinja2's TemplateError and raise_exception() from inside the template
        raise InvalidArgument(f"chat template failed: {str(e) or type(e).__name__}") from e
    finally:
        _state.deadline = None
        _state.max_chars = None
    return "".join(pieces)
