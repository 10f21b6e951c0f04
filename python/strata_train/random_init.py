"""Random parameters with O(1) activations, for parity tests (not a training init: see
StrataModel.reset_parameters). Matrices N(0, 1/in), embeddings N(0, 1), norm weights 1 + N(0, 0.1^2),
hyper-connection fn N(0, 1/(n d)), base N(0, 0.5^2), scale 1 + N(0, 0.1^2)."""

from __future__ import annotations

import torch

from strata_train.model import StrataModel


@torch.no_grad()
def randomize_(model: StrataModel, seed: int) -> StrataModel:
    gen = torch.Generator().manual_seed(seed)

    def normal(shape: torch.Size, std: float) -> torch.Tensor:
        return torch.randn(shape, generator=gen) * std

    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if name == "token_embd.weight":
            p.copy_(normal(p.shape, 1.0))
        elif leaf in ("base", "hc_base"):
            p.copy_(normal(p.shape, 0.5))
        elif leaf in ("scale", "hc_scale") or p.dim() == 1:
            p.copy_(1.0 + normal(p.shape, 0.1))
        else:
            p.copy_(normal(p.shape, p.shape[-1] ** -0.5))
    return model
