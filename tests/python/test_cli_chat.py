"""``strata chat`` at a terminal (a pseudo-terminal driving the real console script): readline line
editing and history (Up recalls a line, also from an earlier chat through the history file), and the
note that the demo model is a code model, not a chat model."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import termios
import time
from pathlib import Path

import pytest

import strata
from strata.convert import make_random_strata
from test_cli_options import TINY, strata_script

UP = "\x1b[A"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(TINY, seed=21, path=tmp_path_factory.mktemp("chat") / "tiny.gguf")


class Terminal:
    """``strata ARGS`` on a pseudo-terminal: type keys, wait for text."""

    def __init__(self, args: list[str], home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
        env.update(PYTHONPATH=str(Path(strata.__file__).resolve().parents[1]), TERM="xterm",
                   HOME=str(home), XDG_STATE_HOME=str(home / "state"), INPUTRC="/dev/null")
        script = strata_script()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: becomes the chat
            os.execve(script, [script, *args], env)
        # A terminal of 100 x 24 (a new pseudo-terminal is 0 x 0: progress bars would be 0 wide).
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        self.seen = ""

    def expect(self, text: str, timeout: float = 120.0) -> str:
        """Read until ``text`` has appeared after what earlier calls consumed; returns what was read."""
        end = time.monotonic() + timeout
        while text not in self.seen:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                raise AssertionError(f"timed out waiting for {text!r}; the terminal shows {self.seen!r}")
            try:
                chunk = os.read(self.fd, 4096).decode("utf-8", "replace")
            except OSError:  # the child exited
                chunk = ""
            if not chunk:
                raise AssertionError(f"the chat ended before {text!r}; the terminal showed {self.seen!r}")
            self.seen += chunk
        head, _, self.seen = self.seen.partition(text)
        return head + text

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def user_messages(model_path: Path, saved: Path) -> list[str]:
    extra = strata.Model(model_path).session().load(saved)
    return [m["content"] for m in extra["chat_messages"] if m["role"] == "user"]


def test_up_recalls_lines_within_and_across_chats(model_path: Path, tmp_path: Path) -> None:
    args = ["chat", "-m", str(model_path), "-n", "3", "--temp", "0"]
    term = Terminal(args, tmp_path)
    term.expect("/quit to leave")
    term.expect("> ")
    term.type("def hello():\r")
    term.expect("> ")
    term.type(UP + "\r")  # Up, Enter: the same line again
    term.expect("> ")
    term.type(f"/save {tmp_path / 'one.json'}\r")
    term.expect("> ")
    term.type("/quit\r")
    assert term.wait() == 0
    assert user_messages(model_path, tmp_path / "one.json") == ["def hello():", "def hello():"]
    history = tmp_path / "state" / "strata" / "chat_history"
    assert "def hello():" in history.read_text()

    term = Terminal(args, tmp_path)  # a new chat: the history file brings the old lines back
    term.expect("> ")
    term.type(UP * 3 + "\r")  # history: def hello(), def hello(), /save ..., /quit
    term.expect("> ")
    term.type(f"/save {tmp_path / 'two.json'}\r")
    term.expect("> ")
    term.type("/quit\r")
    assert term.wait() == 0
    assert user_messages(model_path, tmp_path / "two.json") == ["def hello():"]


def test_no_history_writes_no_file(model_path: Path, tmp_path: Path) -> None:
    term = Terminal(["chat", "-m", str(model_path), "-n", "2", "--no-history"], tmp_path)
    term.expect("> ")
    term.type("/quit\r")
    assert term.wait() == 0
    assert not (tmp_path / "state").exists()


def test_the_demo_model_is_introduced_as_a_code_model(tmp_path: Path) -> None:
    term = Terminal(["chat", "-n", "2", "--no-history"], tmp_path)
    shown = term.expect("> ")
    term.type("/quit\r")
    assert term.wait() == 0
    assert "code-completion model" in shown and "not a chat model" in shown
