"""Low-bit drafter weights (SPEC §2.10, R-11): what Q4_0 / Q5_0 drafter weights cost and save.

Three measurements of one model's MTP block:

* **GEMV error** per requantized tensor and format: the relative RMS error ``‖ŷ − y‖ / ‖y‖`` of the
  GEMV output on Gaussian inputs, where ``y = W·x`` in float64 with W the stored weights decoded and
  ``ŷ`` is the kernel's GEMV (activations in the weight type's dot form) on the requantized weights.
  The stored format itself (Q8_0 for the demo model) is listed as the baseline.
* **Bytes per draft step**: the drafter weight bytes one draft step reads (every MTP-block matrix,
  ``used/E`` of the routed experts, the restricted head rows, one embedding row, the F32 vectors and
  hyper-connection tensors) with the drafter as stored and requantized.
* **Acceptance**: greedy speculative decoding of fixed held-out-like prompts (files of the CPython
  standard library that the demo model's recipe holds out) with requant off / q5 / q4 / q4-ggml: tokens
  per round and per-step acceptance from ``session.stats``.

"off" is the drafter as stored (``Config(mtp_draft_q4=False)``); q4 and q5 are R-11's settings alone;
"q4-ggml" is the default drafter (``Config.mtp_draft_q4``): the same tensors in Q4_0 by ggml's rule where
stored wider, and the restricted head too.
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import strata
from strata import _strata, quant
from strata.gguf import GGUFFile

# The drafter tensors R-11 requantizes (names inside the MTP block, blk.{L}.).
REQUANT_TENSORS: tuple[str, ...] = ("attn_q", "attn_output", "fc_embedding", "fc_hidden",
                                    "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp")
# label, type, method; None = the weights as stored.
FORMATS: tuple[tuple[str, str, str], ...] = (("Q4_0 plain", "Q4_0", "ggml"), ("Q4_0 Lloyd", "Q4_0", "lloyd"),
                                             ("Q5_0", "Q5_0", "ggml"))
SETTINGS: tuple[str | None, ...] = (None, "q5", "q4", "q4-ggml")
# Files of the standard library the demo recipe holds out (strata_train.heldout, rate 0.025).
HELDOUT_FILES: tuple[str, ...] = ("abc.py", "ast.py", "io.py", "pkgutil.py", "posixpath.py", "sched.py",
                                  "string.py")


@dataclass
class TensorError:
    name: str
    shape: tuple[int, int]
    stored_type: str
    stored_error: float
    errors: dict[str, float]  # format label -> relative RMS error


@dataclass
class AcceptanceRow:
    setting: str
    prompts: int
    generated: int
    rounds: int
    tokens_per_round: float
    acceptance: list[float]
    drafted: list[int]
    accepted: list[int]
    decode_tok_s: float
    same_text_as_off: int = 0  # prompts whose greedy output equals requant off


@dataclass
class Report:
    model: str
    tensor_errors: list[TensorError] = field(default_factory=list)
    bytes_per_step: dict[str, int] = field(default_factory=dict)
    requant_bytes: dict[str, int] = field(default_factory=dict)
    acceptance: list[AcceptanceRow] = field(default_factory=list)


def _rel_rms(y: np.ndarray, ref: np.ndarray) -> float:
    return float(np.sqrt(np.sum((y - ref) ** 2) / np.sum(ref ** 2)))


def gemv_errors(engine: object, n_inputs: int = 64, seed: int = 0) -> list[TensorError]:
    """Relative RMS error of the GEMV output per tensor and format, on n_inputs Gaussian inputs."""
    rng = np.random.default_rng(seed)
    out = []
    for name in REQUANT_TENSORS:
        w = engine.mtp_weight(name)  # type: ignore[attr-defined]
        if not w["present"]:
            continue
        shape = (int(w["rows"]), int(w["cols"]))
        data = np.asarray(w["data"])
        wf = quant.dequantize(data, w["type"], shape).astype(np.float64)
        x = rng.standard_normal((n_inputs, shape[1])).astype(np.float32)
        ref = x.astype(np.float64) @ wf.T
        stored = _rel_rms(np.asarray(quant.gemv(data, w["type"], shape, x), np.float64), ref)
        errs = {}
        for label, t, method in FORMATS:
            q = quant.quantize(wf.astype(np.float32), t, method=method)  # type: ignore[arg-type]
            errs[label] = _rel_rms(np.asarray(quant.gemv(q, t, shape, x), np.float64), ref)
        out.append(TensorError(name, shape, str(w["type"]), stored, errs))
    return out


def draft_step_bytes(path: str, setting: str | None) -> tuple[int, int]:
    """(bytes of drafter weights read per draft step, bytes of the requantized tensors) at a setting."""
    g = GGUFFile(path)
    n_layer = int(g.value("strata.block_count")) - 1
    prefix = f"blk.{n_layer}."
    used = int(g.value("strata.expert_used_count"))
    n_exp = int(g.value("strata.expert_count"))
    vr = int(g.value("strata.nextn.vocab_size"))
    fmt = {"q4": "Q4_0", "q5": "Q5_0", "q4-ggml": "Q4_0"}.get(setting or "")
    total = 0
    requant = 0
    for t in g.tensors:
        if not t.name.startswith(prefix):
            continue
        base = t.name[len(prefix):].removeprefix("nextn.").removesuffix(".weight")
        nbytes = t.nbytes
        if fmt and base in REQUANT_TENSORS:
            rows, cols = t.numpy_shape[0], t.numpy_shape[-1]
            nbytes = min(nbytes, rows * quant.row_bytes(fmt, cols)) if setting == "q4-ggml" else \
                rows * quant.row_bytes(fmt, cols)
        if base in REQUANT_TENSORS:
            requant += nbytes
        if base.endswith("_exps"):
            nbytes = nbytes * used // n_exp
        if base == "vocab_ids":
            nbytes = vr * 4
        total += nbytes
    out_t = g.tensor("output.weight")
    head_row = out_t.nbytes // out_t.numpy_shape[0]
    if setting == "q4-ggml":  # the gathered head in Q4_0 where stored wider (engine/mtp.h)
        head_row = min(head_row, quant.row_bytes("Q4_0", out_t.numpy_shape[-1]))
    total += vr * head_row  # the restricted head's rows
    emb = g.tensor("token_embd.weight")
    total += emb.nbytes // emb.numpy_shape[0]  # the draft token's embedding row
    return total, requant


def heldout_prompts(n_chars: int = 1200) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    prompts = []
    for rel in HELDOUT_FILES:
        p = root / rel
        if p.is_file():
            prompts.append(p.read_text(encoding="utf-8", errors="replace")[:n_chars])
    return prompts


def acceptance(model_path: str | None, prompts: list[str], max_tokens: int, draft_steps: int,
               threads: int) -> list[AcceptanceRow]:
    model = strata.Model(model_path)
    rows = []
    texts_off: list[str] = []
    for setting in SETTINGS:
        cfg = strata.Config(threads=threads, speculative=True, draft_steps=draft_steps,
                            mtp_q4=setting == "q4", mtp_q5=setting == "q5", mtp_draft_q4=setting == "q4-ggml")
        gen = rounds = tok = 0
        drafted = [0] * draft_steps
        accepted = [0] * draft_steps
        secs = 0.0
        same = 0
        for i, prompt in enumerate(prompts):
            s = model.session(config=cfg)
            text = "".join(s.generate(prompt, max_tokens=max_tokens))
            st = s.stats
            if setting is None:
                texts_off.append(text)
            elif text == texts_off[i]:
                same += 1
            gen += st.generated_tokens
            rounds += st.rounds
            tok += st.round_tokens
            secs += st.decode_seconds
            for j, (d, a) in enumerate(zip(st.drafted, st.accepted, strict=True)):
                drafted[j] += d
                accepted[j] += a
        rows.append(AcceptanceRow(
            setting=setting or "off", prompts=len(prompts), generated=gen, rounds=rounds,
            tokens_per_round=tok / rounds if rounds else 0.0,
            acceptance=[a / d if d else 0.0 for a, d in zip(accepted, drafted, strict=True)],
            drafted=drafted, accepted=accepted, decode_tok_s=(gen - len(prompts)) / secs if secs else 0.0,
            same_text_as_off=same if setting else len(prompts)))
    return rows


def run(model_path: str | None = None, *, max_tokens: int = 96, draft_steps: int = 3, threads: int = 0,
        n_inputs: int = 64, prompts: int | None = None) -> Report:
    path = str(strata.model.DEMO_MODEL_PATH) if model_path is None else model_path
    engine = _strata.Engine(path, n_threads=threads, max_ctx=16, max_rows=4, encode_mtp=False,
                            settings=strata.Config(mtp_draft_q4=False).native())  # the stored weights
    if not engine.has_mtp:
        raise strata.InvalidArgument(f"{path}: the model has no MTP layer")
    rep = Report(model=path, tensor_errors=gemv_errors(engine, n_inputs))
    del engine
    for s in SETTINGS:
        total, rq = draft_step_bytes(path, s)
        rep.bytes_per_step[s or "off"] = total
        rep.requant_bytes[s or "off"] = rq
    ps = heldout_prompts()
    if prompts is not None:
        ps = ps[:prompts]
    rep.acceptance = acceptance(path, ps, max_tokens, draft_steps, threads)
    return rep


def render(rep: Report) -> str:
    lines = [f"model: {rep.model}", "", "GEMV output relative RMS error (Gaussian inputs):", ""]
    labels = [f[0] for f in FORMATS]
    lines.append("| tensor | shape | stored | " + " | ".join(labels) + " |")
    lines.append("|---|---|---|" + "---:|" * len(labels))
    for t in rep.tensor_errors:
        lines.append(f"| {t.name} | {t.shape[0]}×{t.shape[1]} | {t.stored_type} {t.stored_error:.4f} | "
                     + " | ".join(f"{t.errors[lb]:.4f}" for lb in labels) + " |")
    lines += ["", "Drafter weight bytes per draft step:", "",
              "| setting | bytes/step | requantized tensors |", "|---|---:|---:|"]
    for s, b in rep.bytes_per_step.items():
        lines.append(f"| {s} | {b:,} | {rep.requant_bytes[s]:,} |")
    lines += ["", "Greedy speculative decoding, held-out stdlib prompts:", "",
              "| setting | prompts | generated | rounds | tokens/round | acceptance per step | "
              "same text as off | decode tok/s |", "|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in rep.acceptance:
        acc = ", ".join(f"{a:.3f}" for a in r.acceptance)
        lines.append(f"| {r.setting} | {r.prompts} | {r.generated} | {r.rounds} | {r.tokens_per_round:.3f} | "
                     f"{acc} | {r.same_text_as_off}/{r.prompts} | {r.decode_tok_s:.1f} |")
    return "\n".join(lines)
