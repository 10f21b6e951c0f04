"""pytest setup shared by the Python tests.

`strata_train` (the PyTorch reference and training recipe) is not part of the installed `strata`
package, so the tests reach it from the source tree without letting `python/strata` (which has no
native extension in a clean checkout) shadow the installed `strata`:

- in this process the source folder is appended to sys.path, after site-packages;
- subprocesses get PYTHONPATH = the folder holding the imported `strata`, then a temporary folder
  with a link to `strata_train` alone.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_SOURCE = Path(__file__).resolve().parents[2] / "python"
if str(_SOURCE) not in sys.path:
    sys.path.append(str(_SOURCE))

import strata  # noqa: E402  (after the path set-up above)

_TRAIN_ONLY = Path(tempfile.mkdtemp(prefix="strata-train-path-"))
(_TRAIN_ONLY / "strata_train").symlink_to(_SOURCE / "strata_train", target_is_directory=True)
SUBPROCESS_PYTHONPATH = os.pathsep.join([str(Path(strata.__file__).resolve().parents[1]), str(_TRAIN_ONLY)])
os.environ["PYTHONPATH"] = SUBPROCESS_PYTHONPATH
# The cross-process cost cache of adaptive speculation (strata.spec_cost_cache) would write to the real
# home and make a test's first session seeded or not by what earlier tests ran; off for the suite
# (subprocesses too), on in tests/python/test_spec_cost_cache.py, which uses a temporary folder.
os.environ["STRATA_SPEC_CACHE"] = "off"


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """PyTorch on one thread for a module (`pytestmark = pytest.mark.usefixtures("one_torch_thread")`):
    the tests' tensors are tiny, one thread is faster, and the machine's cores are shared."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
