"""``strata.Model``: a GGUF model file, its hyper-parameters and its tokenizer.

A Model is cheap to keep: it validates the file once (the C++ loader checks every key and tensor),
reads the metadata and builds the tokenizer; it holds no KV cache. Each :class:`~strata.Session`
made by :meth:`Model.session` owns its own native engine; the weights are shared (one mapping, and the
repacked copies made once per file and load settings in the process), each session has its own KV
cells, MTP cells, history and RNG.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from strata import _strata
from strata.config import Config
from strata.errors import InvalidArgument, IOFailure
from strata.native_engine import open_engine
from strata.sampling import SamplingPolicy
from strata.session import Session
from strata.spec_cost_cache import SpecCostCache, fastest

if TYPE_CHECKING:
    from strata.tokenizer import Tokenizer

__all__ = ["DEMO_MODEL_PATH", "Model", "ModelInfo", "PerplexityResult"]

DEMO_MODEL_PATH: Path = Path(__file__).resolve().parent / "models" / "strata-demo.gguf"
"""Where the shipped demo model lives inside the package (SPEC §5)."""

# Logit rows per evaluation while scoring text: bounded so a large vocabulary stays within ~32 MiB.
_SCORE_BYTES = 32 << 20


@dataclass(frozen=True)
class ModelInfo:
    """What :meth:`Model.info` reports."""

    path: str
    name: str
    arch: str
    parameters: int
    file_size: int
    vocab_size: int
    context_length: int
    layers: int
    embedding_length: int
    experts: int
    experts_used: int
    has_mtp: bool
    has_tokenizer: bool
    chat_template: bool
    tensor_types: dict[str, int]

    def lines(self) -> list[str]:
        """Human-readable ``key: value`` lines."""
        types = ", ".join(f"{t} ×{n}" for t, n in sorted(self.tensor_types.items()))
        return [
            f"file: {self.path} ({self.file_size / 2**20:.1f} MiB)",
            f"name: {self.name}",
            f"architecture: {self.arch}",
            f"parameters: {_human(self.parameters)} ({self.parameters:,})",
            f"vocabulary: {self.vocab_size:,}",
            f"context length: {self.context_length:,}",
            f"layers: {self.layers}, embedding {self.embedding_length}",
            f"experts: {self.experts} ({self.experts_used} used per token)",
            f"MTP drafter: {'yes' if self.has_mtp else 'no'}",
            f"tokenizer: {'yes' if self.has_tokenizer else 'no'}"
            + (" (with chat template)" if self.chat_template else ""),
            f"tensor types: {types}",
        ]


@dataclass(frozen=True)
class PerplexityResult:
    """Perplexity of a text: ``exp(mean negative log-likelihood)`` over the scored tokens."""

    perplexity: float
    mean_nll: float
    tokens_scored: int
    windows: int
    context: int

    def __str__(self) -> str:
        return (f"perplexity {self.perplexity:.4f} (mean NLL {self.mean_nll:.4f} nats over "
                f"{self.tokens_scored} tokens, {self.windows} window(s) of up to {self.context} tokens)")


def _mtp_file(path: str, arch: str, mtp_model: str | os.PathLike[str] | None) -> str:
    """The MTP file a model uses: the one given, or for a deepseek4 file llama.cpp's
    ``mtp-<name>`` beside it when it exists ("" = none)."""
    if mtp_model is not None:
        if not isinstance(mtp_model, (str, os.PathLike)):
            raise InvalidArgument(
                f"Model(mtp_model=...): expected a file path, got {type(mtp_model).__name__}")
        given = os.fspath(mtp_model)
        if given and arch != "deepseek4":
            raise InvalidArgument(f"mtp_model: {path} is a {arch} model; only deepseek4 models take a "
                                  "separate MTP file")
        return given
    if arch != "deepseek4":
        return ""
    beside = os.path.join(os.path.dirname(path), "mtp-" + os.path.basename(path))
    return beside if os.path.isfile(beside) else ""


class Model:
    """A strata or qwen3moe GGUF model.

    Args:
        path: the GGUF file; ``None`` = the demo model shipped inside the package
            (``strata/models/strata-demo.gguf``).
        mtp_model: a deepseek4 model's MTP layer, which llama.cpp writes into a separate file
            (``convert_hf_to_gguf.py --mtp``, ``strata convert --mtp``): its path, checked against the
            model and used as the drafter. ``None`` = ``mtp-<file name>`` beside a deepseek4 file when
            that exists, else none; ``""`` = none.

    Raises:
        IOFailure: the file cannot be opened (or the demo model is not installed).
        FormatError: the file is not a valid GGUF or not a model strata can run; the message names the
            file and what is wrong.

    Example::

        model = strata.Model("model.gguf")
        session = model.session(sampling=strata.SamplingPolicy(temperature=0.7, seed=1))
        for piece in session.generate("def fibonacci(n):", max_tokens=64):
            print(piece, end="", flush=True)
    """

    def __init__(self, path: str | os.PathLike[str] | None = None,
                 mtp_model: str | os.PathLike[str] | None = None,
                 spec_cost_cache: bool | None = None) -> None:
        if path is None:
            if not DEMO_MODEL_PATH.is_file():
                raise IOFailure(
                    f"the demo model is not installed (expected {DEMO_MODEL_PATH}); pass the path of a GGUF "
                    "model instead: strata.Model('model.gguf'), or --model PATH on the command line"
                )
            path = DEMO_MODEL_PATH
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgument(f"Model(path): expected a file path or None, got {type(path).__name__}")
        self._path = os.fspath(path)
        from strata.gguf import GGUFFile

        gguf = GGUFFile(self._path)  # validates the container
        # The native loader validates hyper-parameters and every tensor without building an engine (an
        # engine would repack weights at load, reading every expert byte just to answer this probe).
        probe = _strata.inspect_model(self._path)
        self._mtp_model = _mtp_file(self._path, str(probe["hparams"]["arch"]), mtp_model)
        if self._mtp_model:
            probe = _strata.inspect_model(self._path, mtp_model=self._mtp_model)
        self._hparams: dict[str, Any] = dict(probe["hparams"])
        if spec_cost_cache is not None and not isinstance(spec_cost_cache, bool):
            raise InvalidArgument(f"Model(spec_cost_cache=...): expected True, False or None, got "
                                  f"{type(spec_cost_cache).__name__}")
        self._has_mtp = bool(probe["has_mtp"])
        # Only a model with a drafter has adaptive speculation's costs to keep.
        self._cost_cache = SpecCostCache.for_model(self._path, self._mtp_model, _strata.__version__,
                                                   on=spec_cost_cache) if self._has_mtp else None
        self._adaptive_costs: dict[str, dict[str, Any]] = (
            {config: {"runs": runs, "seed": fastest(runs)}
             for config, runs in self._cost_cache.load_runs().items()}
            if self._cost_cache is not None else {})
        self._metadata: dict[str, Any] = dict(gguf.metadata)
        self._file_size = gguf.file_size
        self._parameters = sum(t.n_elements for t in gguf.tensors if t.type != "I32")
        self._tensor_types: dict[str, int] = {}
        for t in gguf.tensors:
            self._tensor_types[t.type] = self._tensor_types.get(t.type, 0) + 1
        self._tokenizer: Tokenizer | None = None
        if "tokenizer.ggml.tokens" in self._metadata:
            from strata.tokenizer import Tokenizer

            self._tokenizer = Tokenizer.from_gguf_metadata(self._metadata, source=self._path,
                                                           vocab_size=int(self._hparams["vocab_size"]))

    # ----------------------------------------------------------------------------------- properties
    @property
    def path(self) -> str:
        return self._path

    @property
    def name(self) -> str:
        """``general.name`` (the file name when the file has none)."""
        return str(self._metadata.get("general.name") or Path(self._path).stem)

    @property
    def arch(self) -> str:
        """``"strata"``, ``"qwen3moe"`` or ``"glm4moe"`` (docs/models.md)."""
        return str(self._hparams["arch"])

    @property
    def hparams(self) -> dict[str, Any]:
        """The hyper-parameters the engine runs with (a copy)."""
        return dict(self._hparams)

    @property
    def metadata(self) -> dict[str, Any]:
        """Every GGUF metadata key and value (a copy)."""
        return dict(self._metadata)

    @property
    def vocab_size(self) -> int:
        return int(self._hparams["vocab_size"])

    @property
    def context_length(self) -> int:
        """The context length the model was trained for (``{arch}.context_length``)."""
        return int(self._hparams["context_length"])

    @property
    def has_mtp(self) -> bool:
        """Whether the model has an MTP layer (speculative decoding is available)."""
        return self._has_mtp

    @property
    def adaptive_costs(self) -> dict[str, dict[str, Any]]:
        """Adaptive speculation's costs per ``repr(Config)``: the latest session's
        ``Engine.spec_adaptive_stats()`` snapshot with ``runs`` (the costs each of the last runs measured
        itself, newest first) and ``seed`` (each cost at its fastest over them), which a new session with
        the same settings starts from (docs/drafting.md). Starts with what the cross-process cost cache
        holds for this model file on this machine (``runs`` and ``seed`` only)."""
        return self._adaptive_costs

    def save_adaptive_costs(self, config_key: str) -> None:
        """Write the costs kept for ``config_key`` (a ``repr(Config)``) to the cross-process cost cache
        (nothing when it is off or there are none; a folder that cannot be written is no error)."""
        costs = self._adaptive_costs.get(config_key)
        # An entry only loaded from the file (runs and seed, no session's snapshot) has nothing new.
        if self._cost_cache is not None and costs is not None and "verify_seconds" in costs:
            self._cost_cache.save(config_key, costs)

    @property
    def spec_cost_cache(self) -> str | None:
        """The file adaptive speculation's costs are kept in across processes, or None when off (or
        the model has no MTP layer to draft with)."""
        return None if self._cost_cache is None else str(self._cost_cache.path)

    @property
    def mtp_model(self) -> str:
        """The separate MTP file the model drafts with (deepseek4), or "" when none."""
        return self._mtp_model

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer stored in the file; ``FormatError`` when the file has none."""
        if self._tokenizer is None:
            from strata.errors import FormatError

            raise FormatError(f"{self._path}: the file has no tokenizer (no tokenizer.ggml.* keys), and "
                              "generating needs one to turn the new tokens into text, even from a prompt "
                              "of token ids; convert the model with its tokenizer (strata convert SRC "
                              "OUT.gguf reads the source's tokenizer.json)")
        return self._tokenizer

    @property
    def has_tokenizer(self) -> bool:
        return self._tokenizer is not None

    def info(self) -> ModelInfo:
        """Architecture, size, vocabulary, file and features at a glance."""
        hp = self._hparams
        tok = self._tokenizer
        return ModelInfo(
            path=self._path, name=self.name, arch=self.arch, parameters=self._parameters,
            file_size=self._file_size, vocab_size=self.vocab_size, context_length=self.context_length,
            layers=int(hp["layers"]), embedding_length=int(hp["embedding_length"]),
            experts=int(hp["expert_count"]), experts_used=int(hp["expert_used_count"]), has_mtp=self._has_mtp,
            has_tokenizer=tok is not None, chat_template=tok is not None and tok.chat_template is not None,
            tensor_types=dict(self._tensor_types),
        )

    def __repr__(self) -> str:
        return (f"Model({self._path!r}, arch={self.arch}, params={_human(self._parameters)}, "
                f"vocab={self.vocab_size}, mtp={'yes' if self._has_mtp else 'no'})")

    # ----------------------------------------------------------------------------------- sessions
    def session(self, config: Config | None = None, sampling: SamplingPolicy | None = None) -> Session:
        """A new generation session with its own KV cache.

        Args:
            config: engine and decoding settings (default ``Config()``; ``Config.from_env()`` reads the
                ``STRATA_*`` environment).
            sampling: the session's sampling policy (default greedy, ``SamplingPolicy()``).
        """
        return Session(self, Config() if config is None else config,
                       SamplingPolicy() if sampling is None else sampling)

    def _engine(self, config: Config, *, encode_mtp: bool) -> _strata.Engine:
        """A native engine over this file (strata.native_engine.open_engine)."""
        return open_engine(self._path, config, has_mtp=self._has_mtp, encode_mtp=encode_mtp,
                           mtp_model=self._mtp_model)

    # --------------------------------------------------------------------------------- perplexity
    def perplexity(
        self,
        text: str | Sequence[int],
        *,
        context: int | None = None,
        config: Config | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> PerplexityResult:
        """Perplexity of ``text`` (a string, tokenized with the model's tokenizer, or token ids).

        The tokens are cut into consecutive windows of ``context`` tokens (default: the engine's
        context); each window is evaluated from an empty cache and every token but its first is scored
        by the log-softmax of the logits that predict it. ``progress(n)`` is called with the number of
        tokens evaluated since the last call.
        """
        cfg = Config() if config is None else config
        ids = self.tokenizer.encode(text) if isinstance(text, str) else [int(t) for t in text]
        if len(ids) < 2:
            raise InvalidArgument(f"perplexity needs at least 2 tokens, the text has {len(ids)}")
        engine = self._engine(cfg, encode_mtp=False)
        n_ctx = int(engine.max_ctx) if context is None else int(context)
        if not 2 <= n_ctx <= int(engine.max_ctx):
            raise InvalidArgument(
                f"context must be in [2, {engine.max_ctx}] (the engine's context), got {n_ctx}")
        rows = max(1, min(int(engine.max_rows), _SCORE_BYTES // (4 * self.vocab_size)))
        total = 0.0
        scored = 0
        windows = 0
        for w0 in range(0, len(ids), n_ctx):
            window = ids[w0 : w0 + n_ctx]
            if len(window) < 2:
                break
            windows += 1
            engine.rollback(0)
            for r0 in range(0, len(window), rows):
                chunk = window[r0 : r0 + rows]
                logits = engine.eval(chunk, start_pos=r0, logits="all")
                targets = window[r0 + 1 : r0 + 1 + len(chunk)]  # the last row of a window predicts nothing
                if targets:
                    total += float(np.sum(_nll(logits[: len(targets)], targets)))
                    scored += len(targets)
                if progress is not None:
                    progress(len(chunk))
        mean = total / scored
        return PerplexityResult(perplexity=math.exp(mean), mean_nll=mean, tokens_scored=scored,
                                windows=windows, context=n_ctx)


def _nll(logits: np.ndarray, targets: Sequence[int]) -> np.ndarray:
    """-log softmax(logits[i])[targets[i]] per row, in float64."""
    x = logits.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x - m).sum(axis=1))
    return lse - x[np.arange(len(targets)), np.asarray(targets)]


def _human(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)
