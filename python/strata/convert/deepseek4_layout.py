"""The layout of llama.cpp's ``deepseek4`` GGUF (docs/models.md, section ``deepseek4``): its keys, its
tensor names with the DeepSeek checkpoint tensor each one comes from, and the shape each one must have.

The gguf package on PyPI (0.19) has no DEEPSEEK4 constants, so names and keys are spelled out here as
llama.cpp's ``src/models/deepseek4.cpp`` (commit 0c1e570, vendored by llama-cpp-python 0.3.36) creates
them. Two writers share this module: the Hugging Face converter (``convert/deepseek4.py``) and the random
benchmark model (``bench/ds4_model.py``).

Two kinds of file: the *main* file (blocks 0..L-1, ``nextn_predict_layers`` 0) and the *MTP* file that
llama.cpp's converter writes with ``--mtp``: ``block_count`` L+1, ``nextn_predict_layers`` 1, no trunk
blocks, the MTP layer as block L (a full block plus ``nextn.*``), the shared embedding / norm / LM head,
and the MTP layer's own hyper-connection head as the file's ``output_hc_*``.
"""

from __future__ import annotations

from typing import Any

from gguf import GGUFWriter

from strata.convert.gguf_header import add_moe_shape_keys

ARCH = "deepseek4"
# llama.cpp's llama_expert_gating_func_type value for sqrt(softplus(logit)) scoring.
GATING_SQRT_SOFTPLUS = 4
HC_STREAMS = 4  # llama.cpp asserts hc_mult == 4
# Where the checkpoint keeps the MTP layer (DeepSeek's `mtp.0.*`); the plans below name it
# `layers.{L}.*` and `mtp_source` maps those names to the checkpoint's.
MTP_PREFIX = "mtp.0."

# (GGUF name, checkpoint name); a checkpoint name ending in ".experts" stands for the stack of
# `<prefix>.{0..E-1}.{w}.weight` (see `expert_sources`).
Plan = list[tuple[str, str]]


def attn_plan(i: int, ratio: int) -> Plan:
    """Block i's attention half: norms, low-rank q, shared K=V, grouped output, hyper-connection mixers,
    and for ratio 4 / 128 the compressor (and for 4 the lightning indexer)."""
    b, a = f"blk.{i}", f"layers.{i}.attn"
    plan = [
        (f"{b}.attn_norm.weight", f"layers.{i}.attn_norm.weight"),
        (f"{b}.attn_sinks.weight", f"{a}.attn_sink"),
        (f"{b}.attn_q_a.weight", f"{a}.wq_a.weight"),
        (f"{b}.attn_q_a_norm.weight", f"{a}.q_norm.weight"),
        (f"{b}.attn_q_b.weight", f"{a}.wq_b.weight"),
        (f"{b}.attn_kv.weight", f"{a}.wkv.weight"),
        (f"{b}.attn_kv_a_norm.weight", f"{a}.norm.weight"),
        (f"{b}.attn_output_a.weight", f"{a}.wo_a.weight"),
        (f"{b}.attn_output_b.weight", f"{a}.wo_b.weight"),
    ]
    for part in ("attn", "ffn"):
        plan += [(f"{b}.hc_{part}_{w}.weight", f"layers.{i}.hc_{part}_{w}") for w in ("fn", "base", "scale")]
    if ratio:
        plan += [
            (f"{b}.attn_compressor_kv.weight", f"{a}.compressor.wkv.weight"),
            (f"{b}.attn_compressor_gate.weight", f"{a}.compressor.wgate.weight"),
            (f"{b}.attn_compressor_ape.weight", f"{a}.compressor.ape"),
            (f"{b}.attn_compressor_norm.weight", f"{a}.compressor.norm.weight"),
        ]
    if ratio == 4:
        plan += [
            (f"{b}.indexer.proj.weight", f"{a}.indexer.weights_proj.weight"),
            (f"{b}.indexer.attn_q_b.weight", f"{a}.indexer.wq_b.weight"),
            (f"{b}.indexer_compressor_kv.weight", f"{a}.indexer.compressor.wkv.weight"),
            (f"{b}.indexer_compressor_gate.weight", f"{a}.indexer.compressor.wgate.weight"),
            (f"{b}.indexer_compressor_ape.weight", f"{a}.indexer.compressor.ape"),
            (f"{b}.indexer_compressor_norm.weight", f"{a}.indexer.compressor.norm.weight"),
        ]
    return plan


def ffn_plan(i: int, hashed: bool) -> Plan:
    """Block i's MoE half: router (plus hash table or selection bias), routed and shared experts."""
    b, f = f"blk.{i}", f"layers.{i}.ffn"
    plan = [
        (f"{b}.ffn_norm.weight", f"layers.{i}.ffn_norm.weight"),
        (f"{b}.ffn_gate_inp.weight", f"{f}.gate.weight"),
        (f"{b}.ffn_gate_tid2eid.weight", f"{f}.gate.tid2eid")
        if hashed
        else (f"{b}.exp_probs_b.bias", f"{f}.gate.bias"),
    ]
    plan += [
        (f"{b}.ffn_{g}_exps.weight", f"{f}.experts.{w}")
        for g, w in (("gate", "w1"), ("up", "w3"), ("down", "w2"))
    ]
    plan += [
        (f"{b}.ffn_{g}_shexp.weight", f"{f}.shared_experts.{w}.weight")
        for g, w in (("gate", "w1"), ("up", "w3"), ("down", "w2"))
    ]
    return plan


def expert_sources(source: str, experts: int) -> list[str] | None:
    """The per-expert checkpoint names a routed-expert plan entry stacks, or None for a plain tensor."""
    head, _, w = source.rpartition(".")
    if not head.endswith(".experts"):
        return None
    return [f"{head}.{x}.{w}.weight" for x in range(experts)]


def main_plan(hp: dict[str, Any]) -> Plan:
    """Every tensor of the main file, in llama.cpp's order (embedding, blocks, head)."""
    plan: Plan = [("token_embd.weight", "embed.weight")]
    for i in range(hp["layers"]):
        plan += attn_plan(i, hp["ratios"][i]) + ffn_plan(i, i < hp["n_hash"])
    plan += [
        ("output_hc_fn.weight", "hc_head_fn"),
        ("output_hc_base.weight", "hc_head_base"),
        ("output_hc_scale.weight", "hc_head_scale"),
        ("output_norm.weight", "norm.weight"),
        ("output.weight", "head.weight"),
    ]
    return plan


def mtp_plan(hp: dict[str, Any]) -> Plan:
    """Every tensor of the MTP file as llama.cpp's converter writes it with ``--mtp`` (conversion/
    deepseek.py, DeepseekV4Model.filter_tensors): the shared embedding, final norm and LM head; the MTP
    layer's own ``hc_head_*`` as the file's ``output_hc_*``; the MTP layer as block L (a routed block,
    never hash-routed) with ``nextn.eh_proj`` = [e_proj | h_proj] (concatenated along the input),
    ``nextn.enorm`` / ``nextn.hnorm`` and ``nextn.shared_head_norm`` (the layer's own ``norm``)."""
    n = hp["layers"]
    b = f"blk.{n}"
    plan: Plan = [
        ("token_embd.weight", "embed.weight"),
        ("output_norm.weight", "norm.weight"),
        ("output.weight", "head.weight"),
        ("output_hc_fn.weight", f"layers.{n}.hc_head_fn"),
        ("output_hc_base.weight", f"layers.{n}.hc_head_base"),
        ("output_hc_scale.weight", f"layers.{n}.hc_head_scale"),
    ]
    plan += attn_plan(n, hp["mtp_ratio"]) + ffn_plan(n, False)
    plan += [
        (f"{b}.nextn.eh_proj.weight", f"layers.{n}.eh_proj"),  # built from e_proj and h_proj
        (f"{b}.nextn.enorm.weight", f"layers.{n}.enorm.weight"),
        (f"{b}.nextn.hnorm.weight", f"layers.{n}.hnorm.weight"),
        (f"{b}.nextn.shared_head_norm.weight", f"layers.{n}.norm.weight"),
    ]
    return plan


def mtp_source(name: str, layers: int) -> str:
    """The checkpoint name of an MTP plan entry: `layers.{L}.X` is DeepSeek's `mtp.0.X`."""
    prefix = f"layers.{layers}."
    return MTP_PREFIX + name[len(prefix) :] if name.startswith(prefix) else name


def tensor_shape(gname: str, hp: dict[str, Any]) -> tuple[int, ...]:
    """The numpy shape of a tensor (llama.cpp's create_tensor shapes, reversed). Block L (one past the
    last main block) is the MTP layer, with compression ratio hp["mtp_ratio"]."""
    d, dh, e, f, hc = hp["d"], hp["head_dim"], hp["experts"], hp["expert_ffn"], HC_STREAMS
    mix, q, di = (2 + hc) * hc, hp["heads"] * dh, hp["index_dim"]
    leaf, coff = gname, 0
    if gname.startswith("blk."):
        block = int(gname.split(".")[1])
        leaf = gname.split(".", 2)[-1]
        ratio = hp["ratios"][block] if block < hp["layers"] else hp["mtp_ratio"]
        coff = 2 if ratio == 4 else 1
    shapes = {
        "token_embd.weight": (hp["vocab"], d),
        "output.weight": (hp["vocab"], d),
        "output_norm.weight": (d,),
        "output_hc_fn.weight": (hc, hc * d),
        "output_hc_base.weight": (hc,),
        "output_hc_scale.weight": (1,),
        "attn_norm.weight": (d,),
        "attn_sinks.weight": (hp["heads"],),
        "attn_q_a.weight": (hp["q_lora"], d),
        "attn_q_a_norm.weight": (hp["q_lora"],),
        "attn_q_b.weight": (q, hp["q_lora"]),
        "attn_kv.weight": (dh, d),
        "attn_kv_a_norm.weight": (dh,),
        "attn_output_a.weight": (hp["o_groups"] * hp["o_lora"], q // hp["o_groups"]),
        "attn_output_b.weight": (d, hp["o_groups"] * hp["o_lora"]),
        "hc_attn_fn.weight": (mix, hc * d),
        "hc_attn_base.weight": (mix,),
        "hc_attn_scale.weight": (3,),
        "hc_ffn_fn.weight": (mix, hc * d),
        "hc_ffn_base.weight": (mix,),
        "hc_ffn_scale.weight": (3,),
        "attn_compressor_kv.weight": (coff * dh, d),
        "attn_compressor_gate.weight": (coff * dh, d),
        "attn_compressor_ape.weight": (4 if coff == 2 else 128, coff * dh),
        "attn_compressor_norm.weight": (dh,),
        "indexer.proj.weight": (hp["index_heads"], d),
        "indexer.attn_q_b.weight": (hp["index_heads"] * di, hp["q_lora"]),
        "indexer_compressor_kv.weight": (2 * di, d),
        "indexer_compressor_gate.weight": (2 * di, d),
        "indexer_compressor_ape.weight": (4, 2 * di),
        "indexer_compressor_norm.weight": (di,),
        "ffn_norm.weight": (d,),
        "ffn_gate_inp.weight": (e, d),
        "exp_probs_b.bias": (e,),
        "ffn_gate_tid2eid.weight": (hp["vocab"], hp["experts_used"]),
        "ffn_gate_exps.weight": (e, f, d),
        "ffn_up_exps.weight": (e, f, d),
        "ffn_down_exps.weight": (e, d, f),
        "ffn_gate_shexp.weight": (f * hp["shared"], d),
        "ffn_up_shexp.weight": (f * hp["shared"], d),
        "ffn_down_shexp.weight": (d, f * hp["shared"]),
        "nextn.eh_proj.weight": (d, 2 * d),
        "nextn.enorm.weight": (d,),
        "nextn.hnorm.weight": (d,),
        "nextn.shared_head_norm.weight": (d,),
    }
    return shapes[leaf]


def keeps_f32(gname: str, ndim: int) -> bool:
    """Norms, sinks, the hyper-connection mixers, the compressors' position biases, the router and the
    indexer's weight projection stay F32 whatever the weight type."""
    keep = ("ffn_gate_inp.weight", "_ape.weight", "_fn.weight", "indexer.proj.weight")
    return ndim == 1 or gname.endswith(keep)


def add_keys(writer: GGUFWriter, hp: dict[str, Any], *, mtp: bool = False) -> None:
    """The architecture keys; `mtp` writes the MTP file's (one more block, nextn_predict_layers 1)."""
    arch = ARCH
    n = hp["layers"] + int(mtp)
    ratios = list(hp["ratios"]) + ([hp["mtp_ratio"]] if mtp else [])

    def u32(key: str, value: int) -> None:
        writer.add_uint32(f"{arch}.{key}", int(value))

    def f32(key: str, value: float) -> None:
        writer.add_float32(f"{arch}.{key}", float(value))

    add_moe_shape_keys(writer, hp, blocks=n, ffn=hp["expert_ffn"], kv_heads=1, rope_dim=hp["rope_dim"])
    writer.add_expert_shared_count(hp["shared"])
    writer.add_expert_weights_scale(hp["scale"])
    writer.add_expert_weights_norm(hp["norm_topk"])
    u32("expert_gating_func", GATING_SQRT_SOFTPLUS)
    u32("nextn_predict_layers", int(mtp))
    u32("attention.q_lora_rank", hp["q_lora"])
    u32("attention.sliding_window", hp["window"])
    u32("attention.output_group_count", hp["o_groups"])
    u32("attention.output_lora_rank", hp["o_lora"])
    f32("attention.compress_rope_freq_base", hp["compress_theta"])
    writer.add_array(f"{arch}.attention.compress_ratios", [int(r) for r in ratios])
    u32("attention.indexer.head_count", hp["index_heads"])
    u32("attention.indexer.key_length", hp["index_dim"])
    u32("attention.indexer.top_k", hp["index_topk"])
    u32("hyper_connection.count", HC_STREAMS)
    u32("hyper_connection.sinkhorn_iterations", hp["hc_iters"])
    f32("hyper_connection.epsilon", hp["hc_eps"])
    u32("hash_layer_count", hp["n_hash"])
    writer.add_array(f"{arch}.swiglu_clamp_exp", [hp["swiglu_limit"]] * n)
    writer.add_array(f"{arch}.swiglu_clamp_shexp", [hp["swiglu_limit"]] * n)
    rope = hp["compress_rope"]
    if rope.get("rope_type") == "yarn":  # applies to the compressed (CSA / HCA) layers only
        writer.add_string(f"{arch}.rope.scaling.type", "yarn")
        f32("rope.scaling.factor", rope["factor"])
        u32("rope.scaling.original_context_length", rope["original_max_position_embeddings"])
        f32("rope.scaling.yarn_beta_fast", rope.get("beta_fast", 32.0))
        f32("rope.scaling.yarn_beta_slow", rope.get("beta_slow", 1.0))
