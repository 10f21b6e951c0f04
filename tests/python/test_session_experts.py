"""The expert store and MOCE routing through the Python API (Config -> Model/Session -> Engine).

What must hold:
- a session in stream mode with a small cache and MOCE off generates exactly the tokens of mmap mode;
- the MOCE settings of the Config reach the engine (its ``moce`` property);
- ``session.stats`` counts the call's expert hits / misses / bytes / stall, derives per-token averages,
  and ``generate --stats`` prints them;
- a verification window marks rows >= 1 as draft rows (``Engine.eval(draft_from_row=)``): with the MOCE
  draft flag on they are routed with the draft parameters, with it off exactly as non-draft rows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import strata
from engine_args import engine
from strata import _strata
from strata.cli.__main__ import main
from strata.convert import make_random_strata

CFG = dict(vocab_size=300, d=64, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
           sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
           rope_theta=10000.0, rope_dim=8,
           n_experts=16, n_experts_used=4, expert_ffn=32, shared_ffn=32, hc_count=4, hc_sinkhorn_iters=3,
           hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)
N_MAIN = 3
STREAM = dict(expert_mode="stream", expert_cache="30%", expert_io_threads=2)


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(CFG, seed=31, path=tmp_path_factory.mktemp("sx") / "m.gguf", expert_type="Q8_0")


@pytest.fixture(scope="module")
def model(path: Path) -> strata.Model:
    return strata.Model(path)


def _generate(model: strata.Model, config: strata.Config, n: int = 24) -> strata.Session:
    s = model.session(config)
    "".join(s.generate("hello world", max_tokens=n))
    return s


# ----------------------------------------------------------------------------------- 1. settings
@pytest.mark.parametrize("speculative", [False, True])
def test_prefetch_reads_ahead_and_changes_no_logit(model: strata.Model, speculative: bool) -> None:
    """Expert prefetch (the next layer's router on this layer's input) reads early what the next layer may
    need: the tokens and logits stay those of mmap mode whatever the setting, what it reads is partly used,
    with the setting off nothing is read ahead, and auto reads no more than on."""
    mmap = _generate(model, strata.Config(speculative=speculative))
    runs = {p: _generate(model, strata.Config(speculative=speculative, expert_prefetch=p, **STREAM))
            for p in ("on", "auto", "off")}
    assert all(s.tokens == mmap.tokens for s in runs.values())
    on, auto, off = (runs[p].stats for p in ("on", "auto", "off"))
    assert on.expert_prefetch_reads > 0 and 0 < on.expert_prefetch_used <= on.expert_prefetch_reads
    assert 0 <= auto.expert_prefetch_used <= auto.expert_prefetch_reads
    assert off.expert_prefetch_reads == off.expert_prefetch_used == 0
    assert "read ahead on prediction" in on.summary() and "read ahead" not in off.summary()
    # Logits of a window, bitwise: prefetching changes what is read and when, not what is computed.
    toks = [3, 17, 5, 9, 11, 2, 40, 7]
    rows = []
    for prefetch in ("on", "off"):
        eng = model.session(strata.Config(expert_prefetch=prefetch, **STREAM))._engine
        rows.append(np.asarray(eng.eval(toks)))
    assert np.array_equal(rows[0], rows[1])


def test_prefetch_with_moce_is_repeatable(model: strata.Model) -> None:
    """With MOCE the router reads the residency map, which prefetch changes; the map and the eviction
    order must not depend on when reads finish, so runs with one or four reader threads agree."""
    for mode in ("on", "auto"):
        runs = [_generate(model, strata.Config(speculative=False, moce_bonus=1.0, expert_prefetch=mode,
                                               **{**STREAM, "expert_io_threads": threads}), n=32)
                for threads in (1, 4, 1)]
        assert runs[0].tokens == runs[1].tokens == runs[2].tokens
        assert all(r.stats.expert_prefetch_reads > 0 for r in runs)
        assert len({(r.stats.expert_misses, r.stats.expert_bytes_read, r.stats.expert_prefetch_reads)
                    for r in runs}) == 1
    # True / False read as on / off.
    assert strata.Config(expert_prefetch=True).expert_prefetch == "on"
    assert strata.Config(expert_prefetch=False).expert_prefetch == "off"


def test_prefetch_predicts_with_the_moce_rule(model: strata.Model) -> None:
    """With MOCE the next layer leans on its resident experts, so the prediction routes against that
    layer's residency too: with a strong bonus it names mostly resident experts and reads far less ahead
    than with MOCE off (a plain top-K prediction would read about as much as without MOCE)."""
    runs = {bonus: _generate(model, strata.Config(speculative=False, moce_bonus=bonus, expert_prefetch="on",
                                                  **STREAM), n=32).stats
            for bonus in (0.0, 3.0)}
    assert runs[3.0].expert_prefetch_reads > 0
    assert 2 * runs[3.0].expert_prefetch_reads < runs[0.0].expert_prefetch_reads, runs
    assert runs[3.0].expert_prefetch_used >= 0.8 * runs[3.0].expert_prefetch_reads


@pytest.mark.parametrize("speculative", [False, True])
def test_stream_mode_generates_the_mmap_tokens(model: strata.Model, speculative: bool) -> None:
    mmap = _generate(model, strata.Config(speculative=speculative))
    stream = _generate(model, strata.Config(speculative=speculative, **STREAM))
    assert stream.tokens == mmap.tokens
    assert stream._engine.expert_stats()["mode"] == "stream" and mmap._engine.expert_stats()["mode"] == "mmap"
    st = stream._engine.expert_stats()
    assert 0 < st["slots"] < st["total_experts"]  # a real 30% cache, not every expert


def test_moce_settings_reach_the_engine(model: strata.Model) -> None:
    config = strata.Config(moce_bonus=1.5, moce_rank1=2.0, moce_protect=2, moce_draft=True, **STREAM)
    moce = model.session(config)._engine.moce
    want = config.native().as_dict()["moce"]["params"]
    assert (moce.resident_bonus, moce.rank1_scale, moce.protect, moce.draft) == (
        want.resident_bonus, 2.0, 2, True)
    assert abs(moce.resident_bonus - np.exp(1.5)) < 1e-5
    off = model.session(strata.Config())._engine.moce
    assert (off.resident_bonus, off.protect, off.draft) == (1.0, 0, False)


# -------------------------------------------------------------------------------------- 2. stats
def test_session_stats_count_the_experts(model: strata.Model) -> None:
    s = model.session(strata.Config(speculative=False, **STREAM))
    eng = s._engine
    before = eng.expert_stats()["total"]
    "".join(s.generate("hello world", max_tokens=12))
    after = eng.expert_stats()["total"]
    st = s.stats
    assert st.expert_mode == "stream"
    assert st.expert_hits == after["hits"] - before["hits"]
    assert st.expert_misses == after["misses"] - before["misses"]
    assert st.expert_hits > 0 and st.expert_misses > 0
    slot = eng.expert_stats()["slot_bytes"]
    assert st.expert_bytes_read == after["bytes_read"] - before["bytes_read"] > 0
    # Reads are the misses and the prefetches nobody used.
    reads = st.expert_misses + st.expert_prefetch_reads - st.expert_prefetch_used
    assert st.expert_bytes_read <= reads * slot
    assert st.expert_stall_seconds >= 0.0 and 0 <= st.expert_prefetch_hits <= st.expert_misses
    assert 0 < st.expert_decode_misses <= st.expert_misses
    assert st.expert_misses_per_token == st.expert_decode_misses / (st.generated_tokens - 1)
    assert st.expert_bytes_per_token == st.expert_decode_bytes_read / (st.generated_tokens - 1)
    d = st.as_dict()
    assert d["expert_misses"] == st.expert_misses and d["expert_bytes_per_token"] == st.expert_bytes_per_token
    assert "experts (stream):" in st.summary()
    # The next call counts only itself.
    mid = eng.expert_stats()["total"]
    "".join(s.generate(" more", max_tokens=4))
    end = eng.expert_stats()["total"]
    used = end["hits"] + end["misses"] - mid["hits"] - mid["misses"]
    assert s.stats.expert_hits + s.stats.expert_misses == used


def test_draft_demotions_are_counted_per_call(model: strata.Model) -> None:
    """The retention of draft rows (docs/experts.md): plain decoding has no draft rows and demotes
    nothing; a drafting session reports the store's demotions of its call, and the store says whether it
    demotes now."""
    plain = _generate(model, strata.Config(speculative=False, **STREAM), n=32)
    assert plain.stats.expert_draft_demotions == 0
    assert plain._engine.expert_stats()["demotes_draft_experts"] is False
    s = model.session(strata.Config(speculative=True, **STREAM))
    before = s._engine.expert_stats()["total"]["draft_demotions"]
    "".join(s.generate("hello world", max_tokens=32))
    st = s._engine.expert_stats()
    assert s.stats.expert_draft_demotions == st["total"]["draft_demotions"] - before >= 0
    assert isinstance(st["demotes_draft_experts"], bool)
    assert s.stats.as_dict()["expert_draft_demotions"] == s.stats.expert_draft_demotions
    assert s.tokens == plain.tokens
    mmap = model.session(strata.Config())._engine.expert_stats()
    assert mmap["demotes_draft_experts"] is False and mmap["total"]["draft_demotions"] == 0


def test_session_stats_count_the_experts_while_a_call_streams(model: strata.Model) -> None:
    # The counters are read when stats are asked for, not after every round: mid-stream they still equal
    # the engine's totals since the call began, and an abandoned call keeps its counts.
    s = model.session(strata.Config(speculative=False, **STREAM))
    eng = s._engine
    before = eng.expert_stats()["total"]
    stream = s.generate("hello world", max_tokens=12)
    seen = []
    for i, _ in enumerate(stream):
        now = eng.expert_stats()["total"]
        st = s.stats
        assert st.expert_hits == now["hits"] - before["hits"]
        assert st.expert_misses == now["misses"] - before["misses"]
        seen.append(st.expert_hits + st.expert_misses)
        if i == 5:
            break
    assert seen[-1] > seen[0] > 0
    stream.close()  # abandoned: the counts stay those of the rounds it ran
    now = eng.expert_stats()["total"]
    used = now["hits"] + now["misses"] - before["hits"] - before["misses"]
    assert s.stats.expert_hits + s.stats.expert_misses == used


def test_generate_stats_prints_the_expert_line(path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STRATA_EXPERT_MODE", "stream")
    monkeypatch.setenv("STRATA_EXPERT_CACHE", "30%")
    rc = main(["generate", "-m", str(path), "--max-tokens", "8", "--stats", "hello"])
    err = capsys.readouterr().err
    assert rc == 0
    line = re.search(r"experts \(stream\): (\d+) hits, (\d+) misses \((\d+) prefetched\), [0-9.]+ MiB read, "
                     r"stall [0-9.]+ s; per decoded token [0-9.]+ misses, [0-9.]+ MiB", err)
    assert line is not None, err
    assert int(line.group(2)) > 0


# --------------------------------------------------------------------------------- 3. draft rows
def _engine(path: Path, **kw: Any) -> Any:
    # Half the experts: small enough that LRU evicts, large enough that a layer's router still finds some
    # of its experts resident after a 4-row window (at 30% the other layers' loads evict them all).
    # Expert prefetch off: these tests route against the residency the cache has after known loads.
    kw = {"expert_prefetch": "off", "expert_cache": 0.5, "expert_io_threads": 2, **kw}
    return engine(path, n_threads=2, max_ctx=96, mtp_sink=2, mtp_window=4, expert_mode="stream", **kw)


def _moce(draft: bool) -> Any:
    return _strata.decode.MoceParams(resident_bonus=float(np.exp(0.7)), rank1_scale=2.0, protect=3,
                                     draft=draft)


PROMPT = [int(t) for t in np.random.default_rng(7).integers(0, 300, 12)]


def _verify_window(eng: Any, draft_from_row: int | None) -> list[dict]:
    eng.rollback(0)
    t = int(eng.eval(PROMPT).argmax())
    _, drafts = eng.mtp_draft(t, n_steps=3)
    eng.set_route_trace(True)
    eng.eval([t, *(int(d) for d in drafts)], logits="all", draft_from_row=draft_from_row)
    return eng.route_trace()[:N_MAIN]


def test_verification_rows_are_routed_as_draft_rows(path: Path) -> None:
    params = _moce(draft=True)
    eng = _engine(path, moce=params)
    differs = resident_rows = 0
    for layer in _verify_window(eng, 1):
        assert layer["draft_from_row"] == 1 and layer["rows"] == 4
        probs, ids, res, k = layer["probs"], layer["ids"], layer["resident"], layer["k"]
        assert res is not None and res.sum() < len(res)
        resident_rows += int(res.sum() > 0)
        for r in range(layer["rows"]):
            want, _ = _strata.decode.route_row(probs[r], k, res, params, r >= 1)
            assert np.array_equal(ids[r], want), (r, ids[r], want)
            as_plain, _ = _strata.decode.route_row(probs[r], k, res, params, False)
            differs += r >= 1 and not np.array_equal(want, as_plain)
    assert resident_rows > 0 and differs > 0  # the draft parameters changed a selection: marking observable
    # Without draft_from_row no row is a draft row.
    for layer in _verify_window(eng, None):
        assert layer["draft_from_row"] == -1
        for r in range(layer["rows"]):
            want, _ = _strata.decode.route_row(layer["probs"][r], layer["k"], layer["resident"], params)
            assert np.array_equal(layer["ids"][r], want)


def test_draft_flag_off_routes_draft_rows_as_plain_rows(path: Path) -> None:
    params = _moce(draft=False)
    a = _engine(path, moce=params)
    b = _engine(path, moce=params)
    marked, unmarked = _verify_window(a, 1), _verify_window(b, None)
    for la, lb in zip(marked, unmarked, strict=True):
        assert la["draft_from_row"] == 1
        assert np.array_equal(la["ids"], lb["ids"]) and np.array_equal(la["probs"], lb["probs"])


def test_draft_from_row_across_chunks_and_errors(path: Path) -> None:
    eng = engine(path, n_threads=2, max_ctx=96, max_rows=4, mtp_sink=2, mtp_window=4)
    plain = eng.eval(PROMPT[:10], logits="last")
    eng.set_route_trace(True)
    marked = eng.eval(PROMPT[:10], start_pos=0, logits="last", draft_from_row=6)  # flag off: same logits
    assert np.array_equal(plain, marked)
    assert eng.route_trace()[0]["draft_from_row"] == 0  # the last chunk (rows 8, 9) is all draft rows
    eng.eval(PROMPT[:10], start_pos=0, logits="none", draft_from_row=9)
    assert eng.route_trace()[0]["draft_from_row"] == 1
    with pytest.raises(strata.InvalidArgument, match="draft_from_row"):
        eng.eval(PROMPT[:3], start_pos=0, draft_from_row=-1)


def test_session_verification_marks_draft_rows(model: strata.Model) -> None:
    # Every window whole (no exact cuts): the test reads the rows each window marked.
    s = model.session(strata.Config(speculative=True, moce_bonus=0.7, moce_draft=True, moce_window_cut=0.0,
                                    **STREAM))
    windows: list[tuple[int, int]] = []  # per round: (drafts verified, draft_from_row of the last window)

    class Recorder:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            inner.set_route_trace(True)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def spec_round(self, *args: Any, **kw: Any) -> Any:
            r = self.inner.spec_round(*args, **kw)
            trace = self.inner.route_trace()[0]
            windows.append((r[2], trace["draft_from_row"] if trace["rows"] > 1 else -1))
            return r

    s._engine = Recorder(s._engine)
    "".join(s.generate("hello world", max_tokens=16))
    assert s.stats.rounds > 0
    # Every verification window (a round that verified drafts) ran with its rows >= 1 marked as draft rows.
    verified = [d for n, d in windows if n > 0]
    assert len(verified) == s.stats.rounds and all(d == 1 for d in verified)
    assert all(d == -1 for n, d in windows if n == 0)  # plain steps: one row, no draft rows


# ------------------------------------------------------------- streaming-aware verification windows
def _window_reference(layer: dict, params: Any) -> tuple[list[np.ndarray], int, int]:
    """Each row's expected ids by the rule's text: row 0 with the engine's parameters, draft row r with the
    draft-row rule (b = window_bonus) against the store's map plus every expert rows < r picked; also the
    distinct non-resident experts the window requested, and those plain top-K of the same rows requests."""
    probs, ids, k = layer["probs"], layer["ids"], layer["k"]
    res = layer["resident"]
    base = np.zeros(probs.shape[1], np.uint8) if res is None else res.astype(np.uint8)
    seen = base.copy()
    draft = _strata.decode.MoceParams(resident_bonus=params.window_bonus, protect=1, draft=True)
    want = []
    plain: set[int] = set()
    for r in range(layer["rows"]):
        if r == 0:
            w, _ = _strata.decode.route_row(probs[r], k, res, params, False)
        else:
            w, _ = _strata.decode.route_row(probs[r], k, seen.copy(), draft, True)
        want.append(w)
        seen[ids[r]] = 1
        p, _ = _strata.decode.route_row(probs[r], k)
        plain |= {int(e) for e in p if not base[e]}
    mine = {int(e) for e in ids.ravel() if not base[e]}
    assert mine <= plain
    return want, len(mine), len(plain)


@pytest.mark.parametrize("stream", [True, False])
def test_window_routing_routes_draft_rows_against_the_window(path: Path, stream: bool) -> None:
    params = _strata.decode.MoceParams(window_bonus=float(np.exp(1.0)))
    eng = _engine(path, moce=params) if stream else engine(path, n_threads=2, max_ctx=96, mtp_sink=2,
                                                           mtp_window=4, moce=params)
    assert eng.moce.window_bonus == pytest.approx(np.exp(1.0))
    fewer = 0
    for layer in _verify_window(eng, 1):
        assert (layer["resident"] is not None) == stream
        want, mine, plain = _window_reference(layer, params)
        for r in range(layer["rows"]):
            assert np.array_equal(layer["ids"][r], want[r]), (r, layer["ids"][r], want[r])
        fewer += mine < plain
    assert fewer > 0  # the rule took effect: some layer's window requested fewer experts than plain top-K
    # Prefill and plain steps have no draft rows: routed exactly as without the setting.
    for layer in _verify_window(eng, None):
        for r in range(layer["rows"]):
            want_plain, _ = _strata.decode.route_row(layer["probs"][r], layer["k"], layer["resident"], params)
            assert np.array_equal(layer["ids"][r], want_plain)


def test_window_routing_predicts_only_the_target_rows(path: Path) -> None:
    """Expert prefetch with window routing: the draft rows of a window are routed against what the window
    already requested, which the prediction cannot know, so it reads ahead for the target row only:
    at most K experts for each layer that has a next MoE layer. Without window routing every row's
    prediction reads, which this window exceeds."""
    k = CFG["n_experts_used"]
    bound = k * (N_MAIN - 1)
    reads = {}
    for bonus in (0.0, float(np.exp(1.0))):
        reads[bonus] = []
        for start in range(12, 40, 4):
            eng = _engine(path, expert_prefetch="on", moce=_strata.decode.MoceParams(window_bonus=bonus))
            t = int(eng.eval([int(x) for x in np.random.default_rng(start).integers(0, 300, start)]).argmax())
            before = eng.expert_totals()["prefetch_reads"]
            window = [t, *(int(x) for x in np.random.default_rng(start + 1).integers(0, 300, 5))]
            eng.eval(window, logits="all", draft_from_row=1)
            reads[bonus].append(eng.expert_totals()["prefetch_reads"] - before)
    assert sum(reads[float(np.exp(1.0))]) > 0 and max(reads[float(np.exp(1.0))]) <= bound, reads
    assert max(reads[0.0]) > bound, reads  # every row predicted: the bound above is a real test


def test_prefetch_with_window_routing_is_repeatable(path: Path) -> None:
    """MOCE with its draft rule and window routing: the prediction reads the next layer's residency map,
    which must not depend on when reads finish, so fixed windows give the same logits, misses and reads
    ahead with one and with four reader threads."""
    params = _strata.decode.MoceParams(resident_bonus=float(np.exp(0.7)), rank1_scale=2.0, protect=3,
                                       draft=True, window_bonus=float(np.exp(1.0)))
    runs = []
    for threads in (1, 4):
        eng = _engine(path, expert_io_threads=threads, expert_prefetch="on", moce=params)
        rows = [np.asarray(eng.eval([int(x) for x in np.random.default_rng(5).integers(0, 300, 12)]))]
        for w in range(6):
            window = [int(x) for x in np.random.default_rng(100 + w).integers(0, 300, 4)]
            rows.append(np.asarray(eng.eval(window, logits="all", draft_from_row=1)))
        t = eng.expert_totals()
        runs.append((rows, (t["misses"], t["bytes_read"], t["prefetch_reads"], t["prefetch_used"])))
    assert runs[0][1] == runs[1][1] and runs[0][1][2] > 0, runs[0][1]
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][0], runs[1][0], strict=True))


def test_window_setting_reaches_the_engine(model: strata.Model) -> None:
    cfg = strata.Config(moce_window=1.0, speculative=True, **STREAM)
    assert float(cfg.to_env()["STRATA_MOCE_WINDOW"]) == 1.0
    assert strata.Config.from_env(cfg.to_env()) == cfg
    s = _generate(model, cfg, n=8)
    assert s._engine.moce.window_bonus == pytest.approx(np.exp(1.0), rel=1e-6)
    assert strata.Config().native().as_dict()["moce"]["params"].window_bonus == 1.0  # off by default
    with pytest.raises(strata.ConfigError, match="STRATA_MOCE_WINDOW"):
        strata.Config(moce_window=9.0)
    with pytest.raises(strata.ConfigError, match="STRATA_MOCE_WINDOW"):
        strata.Config(moce_window=-0.5)


# ------------------------------------------------------------------------ exact window cuts (+ drafter)
def test_a_cut_window_keeps_its_first_rows_exactly(path: Path) -> None:
    """cut_from_row drops the rows from the first that would read an expert the rows before it do not:
    the rows it keeps are the whole window's, and the sequence holds only them."""
    stream = _engine(path)
    whole = _engine(path)
    cuts = 0
    for start in range(12, 40, 4):
        prompt = [int(t) for t in np.random.default_rng(start).integers(0, 300, start)]
        t = int(stream.eval(prompt).argmax())
        _, drafts = stream.mtp_draft(t, n_steps=3)
        window = [t, *(int(d) for d in drafts)]
        cut = np.asarray(stream.eval(window, logits="all", draft_from_row=1, cut_from_row=1))
        assert 1 <= cut.shape[0] <= 4 and stream.n_past == start + cut.shape[0]
        whole.eval(prompt)
        full = np.asarray(whole.eval(window, logits="all", draft_from_row=1))
        np.testing.assert_array_equal(cut, full[: cut.shape[0]])
        cuts += cut.shape[0] < 4
        stream.rollback(0)
        whole.rollback(0)
    assert cuts > 0  # some window was cut
    # mmap mode reads nothing through a residency map: nothing is cut.
    mm = engine(path, n_threads=2, max_ctx=96, mtp_sink=2, mtp_window=4)
    t = int(mm.eval(PROMPT).argmax())
    _, drafts = mm.mtp_draft(t, n_steps=3)
    assert np.asarray(mm.eval([t, *(int(d) for d in drafts)], logits="all", cut_from_row=1)).shape[0] == 4
    with pytest.raises(ValueError, match="cut_from_row"):
        mm.eval([t], logits="last", cut_from_row=1)
    with pytest.raises(ValueError, match="cut_from_row"):
        mm.eval([t, t], logits="all", cut_from_row=0)


def test_window_cuts_and_a_resident_drafter_keep_plain_decoding_s_text(model: strata.Model) -> None:
    plain = _generate(model, strata.Config(speculative=False, **STREAM), n=32)
    on = _generate(model, strata.Config(speculative=True, moce_window_cut=0.0, moce_drafter_resident=False,
                                        **STREAM), n=32)
    cut = _generate(model, strata.Config(speculative=True, moce_window_cut=1.0, moce_drafter_resident=True,
                                         **STREAM), n=32)
    assert cut.tokens == plain.tokens == on.tokens
    assert cut.stats.window_cut_drafts > 0 and on.stats.window_cut_drafts == 0
    assert "window cuts dropped" in cut.stats.summary()
    # τ = 1 lets no draft row read for itself: the windows read less than uncut ones.
    assert cut.stats.expert_bytes_per_token < on.stats.expert_bytes_per_token
    native = strata.Config(moce_window_cut=0.25, moce_drafter_resident=True).native().as_dict()["moce"]
    assert native["window_cut"] == 0.25 and native["drafter_resident"] is True
    with pytest.raises(strata.ConfigError, match="STRATA_MOCE_WINDOW_CUT"):
        strata.Config(moce_window_cut=1.5)
    with pytest.raises(strata.ConfigError, match="STRATA_MOCE_DRAFTER_RESIDENT"):
        strata.Config(moce_drafter_resident=2)  # type: ignore[arg-type]
