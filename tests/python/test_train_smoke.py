"""The demo-model trainer: its training forward against the reference, the batched MTP chains against
the reference runner, the shard format, a seconds-long CPU training run, its evaluation and its
export to GGUF (docs/demo-model.md)."""

from __future__ import annotations

import inspect
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGUFReader

from strata_train import ReferenceRunner, StrataModel
from strata_train import distill_drafter as distill
from strata_train.demo_config import DEMO_MODEL, demo_config, smoke_config
from strata_train.evaluate import main as evaluate_main
from strata_train.evaluate import mtp_chain_logits, window_starts
from strata_train.export import export_gguf
from strata_train.gguf_io import load_model as load_gguf_model
from strata_train.random_init import randomize_
from strata_train.shards import load_shards, plan_shards, save_shards, storage_tensor
from strata_train.train import Schedule, restricted_vocab
from strata_train.train import main as train_main
from strata_train.train_forward import DeviceCache, main_streams, moe_forward, train_losses

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
VOCAB = 320
SEQ = 32


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Tiny ops: one thread is fastest, and far faster than two on a shared, busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _total(losses: dict[str, torch.Tensor]) -> torch.Tensor:
    return losses["lm"] + 0.3 * losses["mtp"] + losses["indexer"] + 0.01 * losses["balance"]


def _synthetic_tokens(n: int, seed: int) -> np.ndarray:
    """Documents of ascending runs (t, t+1, ...) ending in <|endoftext|> (id 0): learnable in seconds."""
    rng = np.random.default_rng(seed)
    parts: list[np.ndarray] = []
    while sum(len(p) for p in parts) < n:
        start, length = int(rng.integers(3, 290)), int(rng.integers(8, 60))
        parts += [(start + np.arange(length)) % 290 + 3, np.zeros(1, dtype=np.int64)]
    return np.concatenate(parts)[:n].astype("<u2")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared-data folder: train.bin / heldout.bin (uint16), manifest.json, a real tokenizer.json."""
    from strata_train.tokenizer_train import train_bytelevel_bpe

    folder = tmp_path_factory.mktemp("corpus")
    _synthetic_tokens(60_000, 0).tofile(folder / "train.bin")
    _synthetic_tokens(4_000, 1).tofile(folder / "heldout.bin")
    (folder / "manifest.json").write_text(json.dumps({"dtype": "<u2"}))
    text = Path(json.__file__).read_text() + Path(inspect.__file__).read_text()
    tok = train_bytelevel_bpe([text], vocab_size=300, min_frequency=1)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def _smoke_args(corpus: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--data",
        str(corpus),
        "--out",
        str(out),
        "--config",
        "smoke",
        "--device",
        "cpu",
        "--batch-size",
        "8",
        "--seq-len",
        str(SEQ),
        "--warmup",
        "5",
        "--lr",
        "3e-3",
        "--mtp-vocab",
        "200",
        "--log-every",
        "5",
        "--eval-every",
        "0",
        "--final-windows",
        "8",
        "--final-prompts",
        "4",
        "--prompt-len",
        "16",
        "--new-tokens",
        "8",
        *extra,
    ]


# ----------------------------------------------------------------------------- training forward
@pytest.mark.parametrize("kv_int8", [False, True])
@pytest.mark.parametrize("variant", ["restricted", "full_vocab", "no_hc"])
def test_train_forward_matches_reference(kv_int8: bool, variant: str) -> None:
    cfg = smoke_config(mtp_vocab_ids=tuple(range(0, VOCAB, 3)))
    if variant == "full_vocab":
        cfg = cfg.replace(mtp_vocab_ids=None)
    elif variant == "no_hc":
        cfg = cfg.replace(hc_count=1)
    model = StrataModel(cfg, kv_int8=kv_int8)
    randomize_(model, 7)
    tokens = torch.randint(0, VOCAB, (3, 40), generator=torch.Generator().manual_seed(3))
    params = list(model.parameters())
    ref = model.losses(tokens)
    ref_grads = torch.autograd.grad(_total(ref), params, allow_unused=True)
    fast = train_losses(model, tokens, DeviceCache())
    fast_grads = torch.autograd.grad(_total(fast), params, allow_unused=True)
    for key in ref:
        assert float(fast[key].detach()) == pytest.approx(float(ref[key].detach()), rel=1e-5, abs=1e-6), key
    # int8 cells: a one-ulp difference in k can move a code (docs/reference.md), hence the looser bound
    tol = 3e-3 if kv_int8 else 1e-4
    for (name, _), a, b in zip(model.named_parameters(), ref_grads, fast_grads, strict=True):
        assert (a is None) == (b is None), name
        if a is not None:
            assert float((a - b).norm()) <= tol * float(a.norm()) + 1e-12, name


def test_batched_experts_match_the_loop_under_skewed_routing() -> None:
    """Most tokens routed to one expert: the padded groups must still give MoE.forward's output."""
    cfg = smoke_config(n_experts=6, n_experts_used=2)
    moe = StrataModel(cfg).blk[0].moe
    with torch.no_grad():
        moe.ffn_gate_inp.weight.normal_(0, 0.02)
        moe.ffn_gate_inp.weight[4] += 0.5  # expert 4 wins for most inputs
    x = torch.randn(5, 37, cfg.d, requires_grad=True)
    y_ref, bal_ref = moe(x)
    g_ref = torch.autograd.grad(
        (y_ref.square().sum() + bal_ref), [x, moe.ffn_down_exps, moe.ffn_gate_inp.weight]
    )
    y, bal = moe_forward(moe, x)
    g = torch.autograd.grad((y.square().sum() + bal), [x, moe.ffn_down_exps, moe.ffn_gate_inp.weight])
    assert torch.allclose(y, y_ref, atol=1e-6) and float(bal.detach()) == pytest.approx(
        float(bal_ref.detach())
    )
    for a, b in zip(g_ref, g, strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------- MTP chains
@pytest.mark.parametrize("window,sink", [(8, 2), (2, 1), (0, 0)])
def test_batched_mtp_chains_match_the_runner(window: int, sink: int) -> None:
    changes: dict[str, int] = {"sliding_window": window, "sink_count": sink}
    if window == 0:
        changes.update(indexer_heads=0, indexer_dim=0, indexer_top_k=0)
    cfg = smoke_config(mtp_vocab_ids=tuple(range(0, VOCAB, 2)), **changes)
    model = StrataModel(cfg, kv_int8=False)
    randomize_(model, 11)
    model.eval()
    seq = torch.randint(0, VOCAB, (1, 26), generator=torch.Generator().manual_seed(5))
    logits, greedy = mtp_chain_logits(model, seq, steps=3)
    run = ReferenceRunner(model, kv_int8=False)
    out = run.prefill(seq[0].tolist())
    assert torch.equal(out.logits.argmax(-1), greedy[0])
    for p in range(0, 23):  # ascending bases, as a decoder would draft after each accepted position
        chain = run.mtp_chain(out.streams[p], int(seq[0, p + 1]), p, steps=3)
        for j, step in enumerate(chain):
            assert torch.allclose(logits[j][0, p], step.logits, atol=2e-5), (p, j)
            assert int(model.mtp.vocab_ids[logits[j][0, p].argmax()]) == step.token  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- pieces
def test_restricted_vocab_is_the_most_frequent_ids_sorted() -> None:
    tokens = np.array([5, 5, 5, 2, 2, 9, 9, 7, 1], dtype=np.uint16)
    assert restricted_vocab(tokens, 10, 3) == (2, 5, 9)  # counts 3, 2, 2
    assert restricted_vocab(tokens, 10, 4) == (1, 2, 5, 9)  # 1 and 7 tie (once each): the lower id
    assert restricted_vocab(tokens, 10, 10) is None and restricted_vocab(tokens, 10, 0) is None


def test_schedule_warms_up_then_decays_to_the_floor() -> None:
    s = Schedule(peak=1e-3, warmup=10, min_ratio=0.1, total=110)
    assert s.lr(0) == pytest.approx(1e-4) and s.lr(9) == pytest.approx(1e-3)
    lrs = [s.lr(i) for i in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:], strict=False))
    assert lrs[-1] == pytest.approx(1e-4) and s.lr(500) == pytest.approx(1e-4)
    assert Schedule(peak=1e-3, warmup=10, min_ratio=0.1).lr(50) == 1e-3  # total not planned yet


def test_window_rule_is_evenly_spaced_and_deterministic() -> None:
    assert window_starts(10_000, 100, None).tolist() == list(range(0, 10_000, 100))
    starts = window_starts(10_000, 100, 5)
    assert starts.tolist() == [0, 2500, 5000, 7400, 9900]
    with pytest.raises(ValueError, match="window"):
        window_starts(50, 100, None)


def test_shards_stay_under_the_limit_and_round_trip(tmp_path: Path) -> None:
    cfg = smoke_config(mtp_vocab_ids=tuple(range(0, VOCAB, 3)))
    model = StrataModel(cfg)
    randomize_(model, 2)
    limit = 200_000
    files = save_shards(model, tmp_path, max_bytes=limit)
    shards = [p for p in files if p.suffix == ".safetensors"]
    assert len(shards) > 1 and all(p.stat().st_size < limit + 16_384 for p in shards)
    assert [p.name for p in shards][0] == f"model-00001-of-{len(shards):05d}.safetensors"
    loaded, config = load_shards(tmp_path)
    assert config["config"] == cfg.to_dict() and loaded.cfg == cfg
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.allclose(a.float(), b.float(), rtol=1e-3, atol=1e-4), name
    assert storage_tensor("x", torch.full((300, 300), 7e4)).dtype == torch.float32  # fp16 would overflow
    assert storage_tensor("x", torch.zeros(300, 300)).dtype == torch.float16
    assert storage_tensor("x", torch.zeros(30)).dtype == torch.float32
    with pytest.raises(ValueError, match="does not fit"):
        plan_shards({"big": torch.zeros(1000)}, 100)


def test_demo_config_has_every_feature_on() -> None:
    cfg = demo_config(mtp_vocab_ids=range(4096))
    assert cfg.hc_count == 4 and cfg.gated and cfg.sink_count > 0 and cfg.sliding_window > 0
    assert cfg.has_indexer and cfg.shared_ffn > 0 and cfg.mtp and cfg.mtp_vocab_size == 4096
    assert cfg.context_length == DEMO_MODEL["context_length"] == 512
    # every matrix row length is a multiple of 32, so Q8_0 applies to all of them
    assert all(v % 32 == 0 for v in (cfg.d, cfg.expert_ffn, cfg.shared_ffn, cfg.n_heads * cfg.head_dim))


# ----------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def trained(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("run")
    report = train_main(_smoke_args(corpus, out, "--steps", "30"))
    return out, report


def test_smoke_run_learns_and_writes_the_outputs(trained: tuple[Path, dict]) -> None:
    out, report = trained
    curve = report["loss_curve"]
    assert curve[0]["step"] == 1 and curve[-1]["step"] == 30 and report["steps"] == 30
    assert curve[-1]["lm"] < curve[0]["lm"] - 1.0 and curve[-1]["mtp"] < curve[0]["mtp"] - 1.0
    names = sorted(p.name for p in out.iterdir())
    assert "config.json" in names and "train_log.json" in names and len(names) <= 8
    assert any(n.startswith("model-00001-of-") for n in names)
    log = json.loads((out / "train_log.json").read_text())
    assert log["seed"] == 1234 and log["tokens_seen"] == 30 * 8 * SEQ and log["stop_reason"] == "steps"
    assert log["schedule"]["total"] == 30 and log["tokens_per_s"] > 0
    text = log["final_eval"]["text"]
    assert math.isfinite(text["perplexity"]) and text["perplexity"] < VOCAB / 4
    assert 0.0 <= text["mtp_accuracy"] <= 1.0 and 0.0 < text["mtp_vocab_coverage"] <= 1.0
    drafting = log["final_eval"]["drafting"]
    assert len(drafting["agreement"]) == 3 and 1.0 <= drafting["tokens_per_round"] <= 4.0
    assert drafting["decoder_rounds"] > 0 and 1.0 <= drafting["decoder_tokens_per_round"] <= 4.0
    acc = drafting["decoder_acceptance"]
    assert len(acc) == 3 and all(0.0 <= a <= 1.0 for a in acc) and acc[0] >= acc[1] >= acc[2]
    config = json.loads((out / "config.json").read_text())
    assert len(config["config"]["mtp_vocab_ids"]) == 200


def test_same_seed_same_weights(corpus: Path, tmp_path: Path) -> None:
    for name in ("a", "b"):
        train_main(_smoke_args(corpus, tmp_path / name, "--steps", "4", "--final-prompts", "0"))
    a, _ = load_shards(tmp_path / "a")
    b, _ = load_shards(tmp_path / "b")
    assert all(
        torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )


def test_time_budget_stops_the_run(corpus: Path, tmp_path: Path) -> None:
    args = _smoke_args(corpus, tmp_path, "--time-budget", "1.5", "--final-prompts", "0")
    report = train_main([*args, "--eval-every", "0.5", "--eval-windows", "4"])
    assert report["stop_reason"] in ("time budget", "steps")
    assert report["heldout_curve"] and math.isfinite(report["heldout_curve"][0]["heldout_nll"])
    assert report["train_seconds"] < 1.5 + 1.0
    if report["steps"] > 30:  # the plan is made from the step time measured over steps 10..30
        assert report["schedule"]["total"] is not None


def test_export_to_gguf_and_evaluate_it(trained: tuple[Path, dict], corpus: Path, tmp_path: Path) -> None:
    out, _ = trained
    path = tmp_path / "demo.gguf"
    summary = export_gguf(out, path, tokenizer_json=corpus / "tokenizer.json", weight_type="Q8_0")
    assert summary["tensor_types"].get("Q8_0", 0) > 0 and summary["bytes"] == path.stat().st_size
    reader = GGUFReader(str(path))
    fields = {k: f.contents() for k, f in reader.fields.items()}
    assert fields["general.architecture"] == "strata"
    assert fields["tokenizer.ggml.model"] == "gpt2" and len(fields["tokenizer.ggml.tokens"]) == VOCAB
    assert fields["tokenizer.ggml.tokens"][0] == "<|endoftext|>"
    assert "<|im_start|>" in fields["tokenizer.chat_template"]
    assert fields["strata.nextn.vocab_size"] == 200
    # the file holds the trained weights: the dequantized model predicts like the shards' model
    shards_model, _ = load_shards(out)
    file_model = load_gguf_model(path)
    tokens = torch.from_numpy(np.fromfile(corpus / "heldout.bin", dtype="<u2")[:SEQ].astype(np.int64))[None]
    with torch.no_grad():
        a, b = shards_model(tokens), file_model(tokens)
    assert float((a.argmax(-1) == b.argmax(-1)).float().mean()) > 0.9
    result = evaluate_main(
        [
            str(path),
            "--data",
            str(corpus),
            "--seq-len",
            str(SEQ),
            "--windows",
            "8",
            "--prompts",
            "2",
            "--prompt-len",
            "16",
            "--new-tokens",
            "6",
            "--json",
            str(tmp_path / "eval.json"),
        ]
    )
    assert result["loaded_from"] == "gguf" and math.isfinite(result["text"]["perplexity"])
    assert json.loads((tmp_path / "eval.json").read_text())["drafting"]["steps"] == 3
    with pytest.raises(RuntimeError, match="exceeds"):
        export_gguf(out, tmp_path / "big.gguf", tokenizer_json=corpus / "tokenizer.json", max_mb=0.01)


def test_training_path_needs_neither_strata_nor_gguf(corpus: Path, tmp_path: Path) -> None:
    """The GPU machine has torch, numpy and safetensors only: train, evaluate and save with the
    `strata` package and `gguf` made unimportable."""
    script = (
        "import sys\n"
        "sys.modules['strata'] = None; sys.modules['gguf'] = None\n"
        "from strata_train.train import main\n"
        f"main({_smoke_args(corpus, tmp_path, '--steps', '3')!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "train_log.json").is_file()


# ----------------------------------------------------------------------------- drafter distillation
@pytest.mark.parametrize("kv_int8", [False, True])
def test_distillation_forwards_match_the_training_and_chain_paths(kv_int8: bool) -> None:
    """Step 1 of the chain path is the training forward's drafter row; step 2, fed the text's token,
    is what the evaluator's chain computes when that token is the drafter's own step-1 draft."""
    cfg = smoke_config(mtp_vocab_ids=tuple(range(0, VOCAB, 3)))
    model = StrataModel(cfg, kv_int8=kv_int8)
    randomize_(model, 11)
    assert model.mtp is not None
    tokens = torch.randint(0, VOCAB, (2, 40), generator=torch.Generator().manual_seed(5))
    cache = DeviceCache()
    p0 = tokens.shape[1] - 3  # the last base whose step-2 input token lies inside the crop
    with torch.no_grad():
        first = mtp_chain_logits(model, tokens, 1, cache)[0][0]
        tokens[:, p0 + 2] = model.mtp.vocab_ids[first[:, p0].argmax(-1)]
        main, draft, _ = distill._pair(model, tokens, cache)
        pairs = distill._chain_pairs(model, tokens, 2, cache)
        chain = mtp_chain_logits(model, tokens, 2, cache)[0]
    tol = {"rtol": 1e-3, "atol": 1e-3} if kv_int8 else {"rtol": 1e-5, "atol": 1e-5}
    assert [tuple(p[0].shape[:2]) for p in pairs] == [(2, 39), (2, 38)]
    assert all(p[0].shape[:2] == p[1].shape[:2] for p in pairs)
    torch.testing.assert_close(pairs[0][0][:, :-1], main, rtol=1e-5, atol=1e-5)  # one head, two slicings
    torch.testing.assert_close(pairs[0][1][:, :-1], draft, **tol)
    torch.testing.assert_close(pairs[1][1][:, p0], chain[1][:, p0], **tol)


def test_distillation_trains_only_the_drafter_and_patches_the_file(
    trained: tuple[Path, dict], corpus: Path, tmp_path: Path
) -> None:
    from safetensors.numpy import load_file, save_file

    out, _ = trained
    src, dst, run = tmp_path / "src.gguf", tmp_path / "new.gguf", tmp_path / "distill"
    export_gguf(out, src, tokenizer_json=corpus / "tokenizer.json", weight_type="Q8_0")
    log = distill.train(
        [str(src), "--data", str(corpus), "--out", str(run), "--device", "cpu", "--steps", "40",
         "--batch-size", "8", "--seq-len", str(SEQ), "--lr", "3e-3", "--warmup", "5", "--chain-steps", "2",
         "--eval-windows", "8", "--chain-prompts", "4", "--chain-prompt-len", "16", "--chain-new-tokens", "8"]
    )
    before, after = log["before"]["teacher_forced"], log["after"]["teacher_forced"]
    assert log["steps"] == 40 and after["kl"] < 0.9 * before["kl"]
    assert after["peak"] == before["peak"]  # the main model's distribution did not move
    files = sorted(run.glob("drafter-*.safetensors"))
    assert [f.name for f in files] == ["drafter-1.safetensors", "drafter-2.safetensors"]
    trained_mtp = {k: v for f in files for k, v in load_file(str(f)).items()}
    distill.patch([str(src), str(dst), *map(str, files)])

    a, b = GGUFReader(str(src)), GGUFReader(str(dst))
    assert {k: f.contents() for k, f in a.fields.items() if not k.startswith("GGUF.")} == {
        k: f.contents() for k, f in b.fields.items() if not k.startswith("GGUF.")
    }
    mtp_prefix = f"blk.{smoke_config().n_layers}."
    changed = set()
    for ta, tb in zip(a.tensors, b.tensors, strict=True):
        assert (ta.name, ta.tensor_type, tuple(ta.shape)) == (tb.name, tb.tensor_type, tuple(tb.shape))
        if not np.array_equal(np.asarray(ta.data).view(np.uint8), np.asarray(tb.data).view(np.uint8)):
            changed.add(ta.name)
    assert changed and all(n.startswith(mtp_prefix) for n in changed)
    assert {n for n in trained_mtp if n.endswith("attn_q.weight")} <= changed
    # the new file holds the trained drafter: dequantized, its tensors are the trained values
    new_model = load_gguf_model(dst)
    stored_mtp = distill.drafter_tensors(new_model)
    for name, value in trained_mtp.items():
        stored = stored_mtp[name].detach().numpy()
        assert np.abs(stored - value).max() <= 0.02 * np.abs(value).max() + 1e-6, name
    # and the main model computes exactly what it did
    old_model = load_gguf_model(src)
    tokens = torch.from_numpy(np.fromfile(corpus / "heldout.bin", dtype="<u2")[:SEQ].astype(np.int64))[None]
    with torch.no_grad():
        old = old_model.head(main_streams(old_model, tokens, DeviceCache())[0])
        new = new_model.head(main_streams(new_model, tokens, DeviceCache())[0])
    assert torch.equal(old, new)
    # a tensor the file does not hold is refused before anything is written
    bogus = tmp_path / "bogus.safetensors"
    save_file({"blk.99.attn_q.weight": np.zeros((2, 2), np.float32)}, str(bogus))
    with pytest.raises(ValueError, match="not in"):
        distill.patch([str(src), str(tmp_path / "never.gguf"), str(bogus)])
    assert not (tmp_path / "never.gguf").exists()
