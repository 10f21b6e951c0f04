"""pytest setup shared by the Python tests.

`strata_train` (the PyTorch reference and training recipe) is not part of the installed `strata`
package, so the tests reach it from the source tree. The source folder is appended, not
prepended, so an installed `strata` (with its native extension) still wins over `python/strata`.
"""

from __future__ import annotations

import sys
from pathlib import Path

_SOURCE = str(Path(__file__).resolve().parents[2] / "python")
if _SOURCE not in sys.path:
    sys.path.append(_SOURCE)
