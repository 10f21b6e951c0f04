"""Which corpus files are held out from training (for held-out perplexity and MTP acceptance).

Rule: a file is held out when sha256("strata-heldout-v1:" + its path relative to the corpus root, with
"/" separators), read as a fraction in [0, 1), is below the rate (default 2.5 %). The decision depends
only on the file's own path, so it is the same on every machine and every Python version, and adding
or removing other files never moves a file between train and held-out.
"""

from __future__ import annotations

import hashlib

HELDOUT_SALT = "strata-heldout-v1"
DEFAULT_HELDOUT_RATE = 0.025


def heldout_key(relpath: str) -> float:
    """A fixed pseudo-random fraction in [0, 1) for a corpus-relative path."""
    digest = hashlib.sha256(f"{HELDOUT_SALT}:{relpath}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def is_heldout(relpath: str, rate: float = DEFAULT_HELDOUT_RATE) -> bool:
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"held-out rate must be in [0, 1), got {rate}")
    return heldout_key(relpath) < rate
