"""deepseek4's MTP layer as strata's drafter: llama.cpp writes it into a separate file
(``strata convert DIR --mtp``), which the engine takes as ``mtp_model``. Each draft row of the C++
engine (first and chained steps, past the sliding window of 16) against a reference outside strata:
transformers' own DeepSeek-V4 block, hyper-connection head, norm and LM head loaded from the MTP
tensors, with DeepSeek's MTPBlock glue (test_deepseek4._mtp_reference's construction, run step by
step to chain). Then speculative decoding with it: greedy text identical to plain decoding.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import strata
from strata import _strata
from strata.convert import byte_level_tokenizer, convert_hf_dir
from strata.convert.deepseek4 import convert_deepseek4
from strata.errors import FormatError, InvalidArgument

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekV4ForCausalLM"):
    pytest.skip("transformers without DeepseekV4ForCausalLM (needs >= 5.23)", allow_module_level=True)

from test_deepseek4 import MTP_SCHEDULE, D, MtpReference, V, _main_streams, _save, _with_mtp, hf_ds4  # noqa: E402

TOKENS = [int(t) for t in np.random.default_rng(5).integers(0, V, size=64)]


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, MtpReference, Path, Path]:
    where = tmp_path_factory.mktemp("ds4-mtp-engine")
    model = hf_ds4(seed=6, layer_types=MTP_SCHEDULE)
    saved = _save(model, where / "hf")
    mtp = _with_mtp(saved, like_layer=1)
    main = convert_hf_dir(saved, where / "m.gguf", weight_type="F32", tokenizer="bytes")
    mtp_file = convert_deepseek4(saved, where / "mtp-m.gguf", weight_type="F32",
                                 tokenizer=byte_level_tokenizer(V), mtp=True)
    return model, MtpReference(saved, mtp, where / "ref"), Path(main), Path(mtp_file)


@pytest.mark.parametrize("prompt_len", [1, 20])
def test_draft_rows_equal_the_reference(built: tuple[Any, MtpReference, Path, Path], prompt_len: int) -> None:
    model, ref, main, mtp_file = built
    prompt = TOKENS[:prompt_len]
    eng = _strata.Engine(str(main), n_threads=1, max_ctx=64, mtp_model=str(mtp_file),
                         settings=strata.Config(mtp_sink=0, mtp_window=2051, mtp_draft_q4=False).native())
    assert eng.has_mtp
    t = int(eng.eval(prompt).argmax())
    steps = 5  # 20 + 5 positions: the chain runs past the sliding window of 16
    logits, drafts = eng.mtp_draft(t, n_steps=steps)
    h = _main_streams(model, prompt)
    tokens = [*prompt[1:], t]
    for j in range(steps):
        want, out = ref.rows(h, tokens)
        assert _rel_diff(logits[j], want[-1]) <= 1e-4, j
        assert int(drafts[j]) == int(want[-1].argmax()), j
        h = torch.cat([h, out[-1:]])
        tokens.append(int(drafts[j]))


def test_committed_rows_equal_the_reference(built: tuple[Any, MtpReference, Path, Path]) -> None:
    """After more committed tokens than the window (the drafter's cells encoded as decoding goes), a
    draft from the last position still equals the reference over all committed rows."""
    model, ref, main, mtp_file = built
    eng = _strata.Engine(str(main), n_threads=1, max_ctx=64, mtp_model=str(mtp_file),
                         settings=strata.Config(mtp_draft_q4=False).native())  # the drafter as stored
    prompt = TOKENS[:30]
    eng.eval(prompt[:12])
    for i in range(12, 30):  # single-token steps encode the MTP cells one by one
        eng.eval(prompt[i : i + 1], start_pos=i)
    t = int(eng.eval(prompt[29:30], start_pos=29).argmax())
    logits, _ = eng.mtp_draft(t, n_steps=1)
    want, _ = ref.rows(_main_streams(model, prompt), [*prompt[1:], t])
    assert _rel_diff(logits[0], want[-1]) <= 1e-4


@pytest.mark.parametrize("stream", [False, True], ids=["mmap", "stream"])
def test_speculative_greedy_identical_to_plain(
    built: tuple[Any, MtpReference, Path, Path], stream: bool
) -> None:
    _, _, main, mtp_file = built
    m = strata.Model(main)  # finds mtp-m.gguf beside m.gguf
    assert m.arch == "deepseek4" and m.has_mtp and Path(m.mtp_model) == mtp_file
    kw: dict[str, Any] = dict(expert_mode="stream", expert_cache="50%") if stream else {}

    def run(config: strata.Config) -> strata.Session:
        s = m.session(config=config, sampling=strata.SamplingPolicy())
        "".join(s.generate(TOKENS[:6], max_tokens=40))
        return s

    plain = run(strata.Config(speculative=False, **kw))
    for spec in (None, True):
        for steps in (1, 3):
            s = run(strata.Config(speculative=spec, draft_steps=steps, **kw))
            assert s.tokens == plain.tokens, (spec, steps)
            if spec:
                assert s.stats.speculative and s.stats.rounds > 0
    assert not strata.Model(main, mtp_model="").has_mtp


def test_a_wrong_mtp_file_is_a_clear_error(
    built: tuple[Any, MtpReference, Path, Path], tmp_path: Path
) -> None:
    _, _, main, mtp_file = built
    with pytest.raises(FormatError, match=r"not this model's MTP file: deepseek4.nextn_predict_layers = 0"):
        _strata.Engine(str(main), n_threads=1, max_ctx=16, mtp_model=str(main))
    with pytest.raises(FormatError, match=r"not this model's MTP file"):
        strata.Model(main, mtp_model=main)
    other = hf_ds4(seed=3, layer_types=MTP_SCHEDULE[:3])  # one layer fewer
    saved = _save(other, tmp_path / "hf3")
    _with_mtp(saved, like_layer=1)
    short = convert_deepseek4(saved, tmp_path / "mtp3.gguf", weight_type="F32",
                              tokenizer=byte_level_tokenizer(V), mtp=True)
    with pytest.raises(FormatError, match=r"block_count = 4 \(expected the main model's 4 \+ 1\)"):
        _strata.Engine(str(main), n_threads=1, max_ctx=16, mtp_model=str(short))
    from strata.model import DEMO_MODEL_PATH

    if DEMO_MODEL_PATH.is_file():  # a strata model
        with pytest.raises(InvalidArgument, match="only deepseek4 models take a separate MTP file"):
            strata.Model(None, mtp_model=mtp_file)


@pytest.fixture(scope="module")
def agreeing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Main sub-layer outputs scaled down, so that the streams are mostly the current token's
    embedding, and an MTP layer that reads only the next token's embedding (e_proj = I, h_proj = 0,
    its sub-layers scaled down, the main model's final norm and hc head): the drafter then mostly
    guesses what the main model says next, so drafts are accepted."""
    from safetensors.numpy import load_file, save_file

    where = tmp_path_factory.mktemp("ds4-mtp-agree")
    model = hf_ds4(seed=8, layer_types=MTP_SCHEDULE)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_b_proj.weight.mul_(0.01)
            layer.mlp.experts.down_proj.mul_(0.01)
            layer.mlp.shared_experts.down_proj.weight.mul_(0.01)
    saved = _save(model, where / "hf")
    mtp = _with_mtp(saved, like_layer=1)
    main = load_file(str(saved / "model.safetensors"))
    for name in list(mtp):
        if name.endswith(("attn.wo_b.weight", ".w2.weight")):
            mtp[name] = mtp[name] * np.float32(0.01)
    mtp["mtp.0.e_proj.weight"] = np.eye(D, dtype=np.float32)
    mtp["mtp.0.h_proj.weight"] = np.zeros((D, D), np.float32)
    mtp["mtp.0.enorm.weight"] = np.ones(D, np.float32)
    mtp["mtp.0.norm.weight"] = main["model.norm.weight"]
    for w in ("fn", "base", "scale"):
        mtp[f"mtp.0.hc_head_{w}"] = main[f"model.hc_head.hc_{w}"]
    save_file(mtp, str(saved / "mtp.safetensors"))
    out = Path(convert_hf_dir(saved, where / "a.gguf", weight_type="F32", tokenizer="bytes"))
    convert_deepseek4(saved, where / "mtp-a.gguf", weight_type="F32", tokenizer=byte_level_tokenizer(V),
                      mtp=True)
    return out


def test_accepted_drafts_keep_the_output(agreeing: Path) -> None:
    m = strata.Model(agreeing)
    assert m.has_mtp

    def run(config: strata.Config, **sampling: Any) -> strata.Session:
        s = m.session(config=config, sampling=strata.SamplingPolicy(**sampling))
        "".join(s.generate(TOKENS[:6], max_tokens=48))
        return s

    plain = run(strata.Config(speculative=False))
    for steps in (1, 3):
        spec = run(strata.Config(speculative=True, draft_steps=steps))
        assert spec.tokens == plain.tokens
        # measured 1.84 tokens per round at 1 step, 3.29 at 3
        assert spec.stats.tokens_per_round > 1.5, (steps, spec.stats.tokens_per_round)
    # exact speculative sampling on this drafter: a seeded sampled run repeats itself
    sampled = strata.Config(speculative=True, draft_steps=3)
    a = run(sampled, temperature=0.8, seed=5)
    b = run(sampled, temperature=0.8, seed=5)
    assert a.tokens == b.tokens and a.stats.rounds > 0


def test_cli_generate_drafts_with_the_mtp_file(built: tuple[Any, MtpReference, Path, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from strata.cli.__main__ import main as cli_main

    _, _, main, mtp_file = built
    outs = []
    for spec in ("off", "on"):
        rc = cli_main(["generate", "-m", str(main), "--mtp-model", str(mtp_file), "--speculative", spec,
                       "--temp", "0", "-n", "16", "--stats", "abc"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        outs.append(out)
        if spec == "on":
            assert re.search(r"speculative: \d+ rounds", err + out), err
    assert outs[0] == outs[1]
