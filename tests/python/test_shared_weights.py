"""Sessions of one model share one prepared copy of its weights (engine/prepared_model.h): in mmap mode
every cpu engine opened on the same file with the same load settings reads the same repacked
weights, a changed file or setting gets its own copy, the copy lives as long as an engine holds it,
and sharing changes no result (alternated and concurrent sessions decode what a lone one does)."""

from __future__ import annotations

import gc
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

import strata
from strata import _strata
from strata.convert import make_random_strata

TINY = dict(vocab_size=300, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
            sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
            rope_theta=10000.0, rope_dim=8,
            n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4, hc_sinkhorn_iters=3,
            hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)
PROMPT = "shared weights"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(TINY, seed=11, path=tmp_path_factory.mktemp("shared") / "tiny.gguf",
                              weight_type="Q8_0")


def config(**kw: Any) -> strata.Config:
    return strata.Config(threads=1, repack="on", **kw)


def weights_at(session: strata.Session) -> int:
    """Where the session's engine reads a repacked weight (the MTP block's attention output)."""
    w = session._engine.mtp_weight("attn_output")
    assert w["repacked"]
    return int(w["address"])


def greedy(session: strata.Session, n: int = 24) -> str:
    return "".join(session.generate(PROMPT, max_tokens=n))


def test_sessions_of_one_model_read_one_copy(model_path: Path) -> None:
    gc.collect()
    alive = _strata.prepared_models_alive()
    model = strata.Model(model_path)
    a = model.session(config=config())
    b = model.session(config=config(draft_steps=2))  # a setting preparation does not read
    c = strata.Model(model_path).session(config=config())  # another Model object on the same file
    assert weights_at(a) == weights_at(b) == weights_at(c)
    assert _strata.prepared_models_alive() == alive + 1
    del a, b, c
    gc.collect()
    assert _strata.prepared_models_alive() == alive  # freed with the last engine holding it


def test_load_settings_and_files_get_their_own_copy(model_path: Path, tmp_path: Path) -> None:
    model = strata.Model(model_path)
    base = model.session(config=config())
    f16 = model.session(config=config(kv_type="f16"))
    q4 = model.session(config=config(mtp_q4=True))
    stream = model.session(config=config(expert_mode="stream", expert_cache="50%", expert_io_threads=1))
    addresses = {weights_at(s) for s in (base, f16, q4, stream)}
    assert len(addresses) == 4
    # The same bytes under another name, and this file rewritten: other files, other copies.
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(model_path, copy)
    first = strata.Model(copy).session(config=config())
    assert weights_at(first) != weights_at(base)
    st = os.stat(copy)
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = strata.Model(copy).session(config=config())
    assert weights_at(second) != weights_at(first)
    # Results do not depend on which copy a session reads.
    assert greedy(first) == greedy(second) == greedy(base)


def test_sharing_changes_no_result(model_path: Path) -> None:
    lone = greedy(strata.Model(model_path).session(config=config(speculative=False)), 40)
    model = strata.Model(model_path)
    # Alternated: two sessions on the shared weights, a round each.
    a = model.session(config=config(speculative=False))
    b = model.session(config=config(speculative=False))
    ga, gb = a.generate(PROMPT, max_tokens=40), b.generate(PROMPT, max_tokens=40)
    pa, pb = [], []
    for x, y in zip(ga, gb, strict=False):
        pa.append(x)
        pb.append(y)
    pa.extend(ga)
    pb.extend(gb)
    assert "".join(pa) == "".join(pb) == lone
    # Concurrent: four sessions decoding at once on their own threads (speculative, the default).
    spec_lone = greedy(model.session(config=config()), 40)
    out: dict[int, str] = {}

    def run(i: int) -> None:
        out[i] = greedy(model.session(config=config()), 40)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [out[i] for i in range(4)] == [spec_lone] * 4
