"""A dependency-free progress bar for the converters, on stderr.

On a terminal the bar is redrawn in place; elsewhere (logs, pipes) a line is written at every tenth
of the work, so a long conversion still shows that it moves without flooding the log.
"""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    def __init__(self, total: int, label: str, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.total = max(int(total), 1)
        self.label = label
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_tenth = -1

    def step(self, what: str = "") -> None:
        self.done = min(self.done + 1, self.total)
        if not self.enabled:
            return
        frac = self.done / self.total
        if self._tty:
            width = 30
            filled = int(frac * width)
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {what[:40]:<40}")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            tenth = int(frac * 10)
            if tenth != self._last_tenth:
                self._last_tenth = tenth
                self.stream.write(f"{self.label}: {self.done}/{self.total} tensors ({100 * frac:.0f}%)\n")
        self.stream.flush()
