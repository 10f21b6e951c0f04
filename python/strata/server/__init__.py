"""An OpenAI-compatible HTTP server for strata models (``python -m strata.cli serve``; docs/server.md).

Needs the ``server`` extra (fastapi, uvicorn).
"""

from __future__ import annotations

from strata.server.app import create_app
from strata.server.engine import EngineWorker

__all__ = ["EngineWorker", "create_app"]
