"""A trainable glm4moe model with its MTP (nextn) layer, for the head-to-head model (docs/glm-mtp-model.md).

The math is transformers' ``Glm4MoeForCausalLM`` (attention with q/k/v biases, partial NEOX RoPE, one
leading dense layer, sigmoid routing with the selection bias ``e_score_correction_bias``, renormalised
top-K weights, one shared expert) plus the nextn layer as llama.cpp's ``graph_mtp`` and strata's
drafter run it (docs/gguf.md §4):

    x = eh_proj @ concat(enorm(Emb[t_{p+1}]), hnorm(S));  y = block(x);  logits = head @ shared_head_norm(y)

with S = output_norm(h_p) for a first draft step and S = shared_head_norm(y_prev) for a chained one.
Parameter names are the Hugging Face checkpoint's (``model.layers.N.*``, the nextn layer is layer
``num_hidden_layers``), so ``state_dict()`` converts with ``strata convert`` as it is.

Routed experts run densely: every expert on every token, with the router's weight zero for the
experts a token did not select. That is the same function as a sparse dispatch, costs E/K times its
expert FLOPs, and on a GPU is two large matrix products per layer with no host sync.
Only torch is needed (no transformers, no strata).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class GlmMtpConfig:
    vocab: int = 8192
    d: int = 512
    layers: int = 5  # main layers (num_hidden_layers); the nextn layer comes after them
    dense: int = 1  # first_k_dense_replace
    heads: int = 8
    kv_heads: int = 2
    head_dim: int = 64
    rotary_factor: float = 0.5
    rope_theta: float = 10000.0
    ffn: int = 1536  # the dense layers' FFN width
    experts: int = 64
    top_k: int = 4
    expert_ffn: int = 256
    shared: int = 1
    scale: float = 1.0  # routed_scaling_factor
    eps: float = 1e-5
    context: int = 2048

    def hf_config(self, bos: int | None = None, eos: int | None = None) -> dict[str, Any]:
        """config.json of the Hugging Face checkpoint (transformers' Glm4MoeConfig keys)."""
        return {
            "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe",
            "vocab_size": self.vocab, "hidden_size": self.d, "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads, "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim, "partial_rotary_factor": self.rotary_factor,
            "rope_theta": self.rope_theta, "intermediate_size": self.ffn,
            "moe_intermediate_size": self.expert_ffn, "n_routed_experts": self.experts,
            "num_experts_per_tok": self.top_k, "n_shared_experts": self.shared,
            "first_k_dense_replace": self.dense, "routed_scaling_factor": self.scale,
            "norm_topk_prob": True, "use_qk_norm": False, "attention_bias": True,
            "num_nextn_predict_layers": 1, "max_position_embeddings": self.context,
            "rms_norm_eps": self.eps, "tie_word_embeddings": False, "hidden_act": "silu",
            "n_group": 1, "topk_group": 1, "bos_token_id": bos, "eos_token_id": eos,
            "torch_dtype": "float32", "strata_train": asdict(self),
        }


def rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


class RmsNorm(nn.Module):
    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps)


class Rotary(nn.Module):
    """NEOX RoPE on the first rot dims of each head (transformers' Glm4Moe partial rotary)."""

    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__()
        self.rot = int(cfg.head_dim * cfg.rotary_factor)
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, self.rot, 2, dtype=torch.float64) / self.rot))
        self.register_buffer("inv_freq", inv.float(), persistent=False)

    def forward(self, x: Tensor, pos: Tensor) -> Tensor:
        """x [B, H, T, Dh], pos [T]."""
        ang = pos.float()[:, None] * self.inv_freq[None]
        cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
        sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
        xr, xp = x[..., : self.rot], x[..., self.rot:]
        half = self.rot // 2
        rotated = torch.cat([-xr[..., half:], xr[..., :half]], -1)
        return torch.cat([xr * cos + rotated * sin, xp], -1)


class Attention(nn.Module):
    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.q_proj = nn.Linear(cfg.d, cfg.heads * cfg.head_dim, bias=True)
        self.k_proj = nn.Linear(cfg.d, cfg.kv_heads * cfg.head_dim, bias=True)
        self.v_proj = nn.Linear(cfg.d, cfg.kv_heads * cfg.head_dim, bias=True)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.d, bias=False)

    def forward(self, x: Tensor, rope: Rotary, pos: Tensor) -> Tensor:
        b, t, _ = x.shape
        c = self.cfg
        q = self.q_proj(x).view(b, t, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        q, k = rope(q, pos), rope(k, pos)
        rep = c.heads // c.kv_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, c.heads * c.head_dim))


class DenseMlp(nn.Module):
    def __init__(self, d: int, f: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Router(nn.Module):
    """transformers' Glm4MoeTopkRouter with n_group = topk_group = 1."""

    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.experts, cfg.d))
        # the selection bias: not trained by gradient, moved towards balanced load (aux-loss-free)
        self.register_buffer("e_score_correction_bias", torch.zeros(cfg.experts))


class Experts(nn.Module):
    """The routed experts; parameters kept per expert in Hugging Face's layout."""

    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__()
        e, f, d = cfg.experts, cfg.expert_ffn, cfg.d
        self.gate = nn.Parameter(torch.empty(e, f, d))
        self.up = nn.Parameter(torch.empty(e, f, d))
        self.down = nn.Parameter(torch.empty(e, d, f))


class MoeMlp(nn.Module):
    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.gate = Router(cfg)
        self.experts = Experts(cfg)
        self.shared_experts = DenseMlp(cfg.d, cfg.expert_ffn * cfg.shared)
        self.load: Tensor | None = None  # tokens per expert of the last forward (for the bias update)

    def forward(self, x: Tensor) -> Tensor:
        c = self.cfg
        shape = x.shape
        xt = x.reshape(-1, c.d)
        with torch.autocast(x.device.type, enabled=False):  # the router in float32, as transformers
            scores = torch.sigmoid(F.linear(xt.float(), self.gate.weight.float()))
            sel = scores + self.gate.e_score_correction_bias
            ids = torch.topk(sel, c.top_k, dim=-1, sorted=False).indices
            w = scores.gather(1, ids)
            w = w / (w.sum(-1, keepdim=True) + 1e-20) * c.scale
            dense_w = torch.zeros_like(scores).scatter(1, ids, w)  # [T, E], zero where not selected
        self.load = torch.bincount(ids.flatten(), minlength=c.experts).detach()
        ex = self.experts
        f = c.expert_ffn
        gu = torch.cat([ex.gate, ex.up], 1).reshape(c.experts * 2 * f, c.d)
        h = (xt @ gu.to(xt.dtype).T).view(-1, c.experts, 2 * f)
        act = F.silu(h[..., :f]) * h[..., f:] * dense_w.to(h.dtype)[..., None]
        down = ex.down.permute(0, 2, 1).reshape(c.experts * f, c.d)
        routed = act.reshape(-1, c.experts * f) @ down.to(act.dtype)
        return (routed + self.shared_experts(xt)).view(shape)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: GlmMtpConfig, moe: bool) -> None:
        super().__init__()
        self.input_layernorm = RmsNorm(cfg.d, cfg.eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RmsNorm(cfg.d, cfg.eps)
        self.mlp: nn.Module = MoeMlp(cfg) if moe else DenseMlp(cfg.d, cfg.ffn)

    def forward(self, x: Tensor, rope: Rotary, pos: Tensor) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), rope, pos)
        return x + self.mlp(self.post_attention_layernorm(x))


class SharedHead(nn.Module):
    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__()
        self.norm = RmsNorm(cfg.d, cfg.eps)


class NextnLayer(DecoderLayer):
    """The MTP layer: a MoE decoder layer plus eh_proj, enorm, hnorm and shared_head.norm."""

    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__(cfg, moe=True)
        self.eh_proj = nn.Linear(2 * cfg.d, cfg.d, bias=False)
        self.enorm = RmsNorm(cfg.d, cfg.eps)
        self.hnorm = RmsNorm(cfg.d, cfg.eps)
        self.shared_head = SharedHead(cfg)

    def step(self, emb: Tensor, state: Tensor, rope: Rotary, pos: Tensor) -> Tensor:
        """emb: Emb[t_{p+1}], state: the normalised start state S; returns the block output y."""
        x = self.eh_proj(torch.cat([self.enorm(emb), self.hnorm(state)], -1))
        return self.forward(x, rope, pos)


class GlmBody(nn.Module):
    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.d)
        layers: list[nn.Module] = [DecoderLayer(cfg, moe=i >= cfg.dense) for i in range(cfg.layers)]
        layers.append(NextnLayer(cfg))
        self.layers = nn.ModuleList(layers)
        self.norm = RmsNorm(cfg.d, cfg.eps)


class GlmMtpModel(nn.Module):
    def __init__(self, cfg: GlmMtpConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = GlmBody(cfg)
        self.lm_head = nn.Linear(cfg.d, cfg.vocab, bias=False)
        self.rope = Rotary(cfg)

    @property
    def nextn(self) -> NextnLayer:
        layer = self.model.layers[self.cfg.layers]
        assert isinstance(layer, NextnLayer)
        return layer

    def reset_parameters(self, std: float = 0.02) -> None:
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, std)

    def moe_layers(self) -> list[MoeMlp]:
        return [m for m in self.modules() if isinstance(m, MoeMlp)]

    def hidden(self, tokens: Tensor) -> Tensor:
        """The main model's last hidden state before output_norm, [B, T, d]."""
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers[: self.cfg.layers]:
            x = layer(x, self.rope, pos)
        return x

    def losses(self, tokens: Tensor, chain: bool = True) -> dict[str, Tensor]:
        """lm: next-token CE; mtp1: CE of the first draft step (t_{p+2} from output_norm(h_p) and
        t_{p+1}); mtp2: a chained step (t_{p+3} from shared_head_norm(y1_p) and t_{p+2}), over the
        rows of its own pass, an approximation of the chain's cells in decoding."""
        cfg, mtp = self.cfg, self.nextn
        t = tokens.shape[1]
        h = self.hidden(tokens)
        hn = self.model.norm(h)
        out: dict[str, Tensor] = {}
        out["lm"] = F.cross_entropy(self.lm_head(hn[:, :-1]).float().reshape(-1, cfg.vocab),
                                    tokens[:, 1:].reshape(-1))
        emb = self.model.embed_tokens(tokens)
        pos = torch.arange(t - 1, device=tokens.device)
        y1 = mtp.step(emb[:, 1:], hn[:, :-1], self.rope, pos)  # rows p = 0 .. T-2
        s1 = mtp.shared_head.norm(y1)
        out["mtp1"] = F.cross_entropy(self.lm_head(s1[:, :-1]).float().reshape(-1, cfg.vocab),
                                      tokens[:, 2:].reshape(-1))
        if chain:
            y2 = mtp.step(emb[:, 2:], s1[:, :-1], self.rope, pos[1:])  # rows p+1 = 1 .. T-2
            s2 = mtp.shared_head.norm(y2)
            out["mtp2"] = F.cross_entropy(self.lm_head(s2[:, :-1]).float().reshape(-1, cfg.vocab),
                                          tokens[:, 3:].reshape(-1))
        return out

    @torch.no_grad()
    def agreement(self, tokens: Tensor) -> tuple[float, float]:
        """Teacher-forced: how often the first draft step's argmax equals the main model's greedy
        token at p+1, and the same for the chained step given the first matched (both over B x T)."""
        h = self.hidden(tokens)
        hn = self.model.norm(h)
        main = self.lm_head(hn).argmax(-1)  # main[p] predicts t_{p+1}
        emb = self.model.embed_tokens(tokens)
        pos = torch.arange(tokens.shape[1] - 1, device=tokens.device)
        mtp = self.nextn
        y1 = mtp.step(emb[:, 1:], hn[:, :-1], self.rope, pos)
        s1 = mtp.shared_head.norm(y1)
        d1 = self.lm_head(s1).argmax(-1)  # d1[p] drafts t_{p+2}
        hit1 = d1 == main[:, 1:]
        y2 = mtp.step(emb[:, 2:], s1[:, :-1], self.rope, pos[1:])
        d2 = self.lm_head(mtp.shared_head.norm(y2)).argmax(-1)  # drafts t_{p+3}
        hit2 = (d2 == main[:, 2:]) & hit1[:, :-1]
        a1 = hit1.float().mean().item()
        return a1, hit2.float().sum().item() / max(1.0, hit1[:, :-1].float().sum().item())
