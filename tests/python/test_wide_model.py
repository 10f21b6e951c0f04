"""The widened demo model (strata.bench.wide_model) keeps the demo model's function."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import strata
from strata import _strata
from strata.bench import wide_model
from strata.cli import bench_wide_model_cmd
from strata.gguf import GGUFFile

DEMO = wide_model.default_demo_path()
PROMPT = "import os\n\ndef read_config(path):\n    "


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wide") / "wide.gguf"
    rep = wide_model.widen_model(DEMO, path, expert_mult=2, shared_mult=3)
    assert rep.expert_ffn == 320 and rep.shared_ffn == 1152 and rep.blocks == 5
    return path


@pytest.fixture(scope="module")
def deep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("deep") / "deep.gguf"
    rep = wide_model.widen_model(DEMO, path, expert_mult=2, shared_mult=2, extra_layers=3)
    assert rep.blocks == 8
    return path


def test_shapes_and_zero_blocks(wide: Path) -> None:
    src, dst = GGUFFile(str(DEMO)), GGUFFile(str(wide))
    assert dst.metadata["strata.expert_feed_forward_length"] == 320
    assert dst.metadata["strata.expert_shared_feed_forward_length"] == 1152
    ts = {t.name: t for t in src.tensors}
    td = {t.name: t for t in dst.tensors}
    assert set(ts) == set(td)
    assert td["blk.0.ffn_up_exps.weight"].shape == (384, 320, 16)
    assert td["blk.0.ffn_down_exps.weight"].shape == (320, 384, 16)
    assert td["blk.4.ffn_down_shexp.weight"].shape == (1152, 384)
    assert td["blk.0.attn_q.weight"].nbytes == ts["blk.0.attn_q.weight"].nbytes
    raw = np.fromfile(wide, dtype=np.uint8)
    down = td["blk.1.ffn_down_exps.weight"]
    rows = raw[down.offset : down.offset + down.nbytes].reshape(16, 384, 10 * 34)
    assert not rows[:, :, 5 * 34 :].any()  # the appended blocks: scale 0, quants 0
    assert rows[:, :, : 5 * 34].any()
    up = td["blk.1.ffn_up_exps.weight"]
    up_rows = raw[up.offset : up.offset + up.nbytes].reshape(16, 320, 12 * 34)
    assert np.array_equal(up_rows[:, 160:], up_rows[:, :160])  # new unit j copies unit j - 160


def _logits(path: Path) -> np.ndarray:
    ids = strata.Model(str(DEMO)).tokenizer.encode(PROMPT * 3)
    return np.asarray(_strata.Engine(str(path), max_ctx=256, encode_mtp=False).eval(ids, logits="all"))


def test_widening_gives_the_same_logits(wide: Path) -> None:
    want, got = _logits(DEMO), _logits(wide)
    assert np.array_equal(got.argmax(1), want.argmax(1))
    # Zero blocks add exact zeros; only the summation order inside a dot kernel may differ.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))


def test_inserted_blocks_change_logits_only_by_the_hc_epsilon(deep: Path) -> None:
    want, got = _logits(DEMO), _logits(deep)
    assert np.array_equal(got.argmax(1), want.argmax(1))
    # 3 inserted blocks, 2 hyper-connections each, ~1e-6 of mixing per connection.
    err = float(np.abs(got - want).max()) / float(np.abs(want).max())
    assert err < 1e-3, err
    dst = {t.name: t for t in GGUFFile(str(deep)).tensors}
    assert "blk.7.nextn.fc_hidden.weight" in dst and "blk.4.nextn.fc_hidden.weight" not in dst
    assert GGUFFile(str(deep)).metadata["strata.block_count"] == 8


def test_inserted_block_tensors(deep: Path) -> None:
    raw = np.fromfile(deep, dtype=np.uint8)
    t = {x.name: x for x in GGUFFile(str(deep)).tensors}

    def data(name: str) -> np.ndarray:
        return raw[t[name].offset : t[name].offset + t[name].nbytes]

    for leaf in ("attn_output", "ffn_down_exps", "ffn_down_shexp", "hc_attn_fn", "hc_ffn_fn"):
        assert not data(f"blk.5.{leaf}.weight").any(), leaf
    base = data("blk.6.hc_ffn_base.weight").view(np.float32)
    comb = base[8:].reshape(4, 4)
    assert np.all(base[:8] == 0) and np.all(np.diag(comb) == 60)
    assert np.all(comb[~np.eye(4, dtype=bool)] == -60)
    # inserted block 5 = 4 + 1 is a copy of main block 1
    assert np.array_equal(data("blk.5.attn_q.weight"), data("blk.1.attn_q.weight"))


@pytest.mark.parametrize("which", ["wide", "deep"])
def test_same_greedy_tokens_and_drafts(which: str, request: pytest.FixtureRequest) -> None:
    model_path: Path = request.getfixturevalue(which)
    outs = []
    for path in (DEMO, model_path):
        # speculative on: every round drafts 3 (auto would choose by each model's own costs); the drafter
        # as stored: requantizing a widened matrix to Q4_0 (the default) need not round as the original does
        s = strata.Model(str(path)).session(config=strata.Config(speculative=True, mtp_draft_q4=False),
                                            sampling=strata.SamplingPolicy(temperature=0.0))
        text = "".join(s.generate(PROMPT, max_tokens=48))
        outs.append((text, s.tokens, s.stats.drafted, s.stats.accepted))
    assert outs[0] == outs[1]  # tokens, and the drafter's drafts and acceptances


def test_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expert_mult"):
        wide_model.widen_model(DEMO, tmp_path / "x.gguf", expert_mult=0)
    with pytest.raises(ValueError, match="extra_layers"):
        wide_model.widen_model(DEMO, tmp_path / "x.gguf", expert_mult=1, extra_layers=-1)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf")
    with pytest.raises(ValueError):
        wide_model.widen_model(junk, tmp_path / "y.gguf", expert_mult=2)


def test_cli_writes_into_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from strata.cli.__main__ import main
    args = ["bench", "wide-model", "--expert-mult", "1", "--shared-mult", "2", "--extra-layers", "0"]
    assert main(args) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out == tmp_path / "strata" / bench_wide_model_cmd.wide_model_name(1, 2, 0) and out.is_file()
    assert GGUFFile(str(out)).metadata["strata.expert_shared_feed_forward_length"] == 768
