"""
strata native core
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import typing
from . import quant
from . import decode
__all__: list[str] = ['ConfigError', 'Engine', 'EngineCheckpoint', 'FormatError', 'GGUFFile', 'IOFailure', 'InvalidArgument', 'Settings', 'StrataError', 'active_isa', 'amx_status', 'build_features', 'decode', 'force_isa', 'inspect_model', 'metal_device_available', 'prepared_models_alive', 'quant', 'set_log_level', 'set_threads', 'supported_isas', 'threads']
class StrataError(Exception):
    pass
class FormatError(StrataError):
    pass
class ConfigError(StrataError, ValueError):
    pass
class InvalidArgument(StrataError, ValueError):
    pass
class IOFailure(StrataError, OSError):
    pass
class GGUFFile:
    """
    A validated, memory-mapped GGUF file (see strata.gguf.GGUFFile)
    """
    @staticmethod
    def from_bytes(data: bytes, name: str = '<memory>') -> GGUFFile:
        """
        Validate a GGUF held in memory (copied)
        """
    @staticmethod
    def open(path: str) -> GGUFFile:
        """
        Map and validate a GGUF file
        """
    def array_length(self, key: str) -> typing.Any:
        ...
    def has(self, key: str) -> bool:
        ...
    def keys(self) -> list:
        ...
    def metadata(self, max_items: typing.SupportsInt | typing.SupportsIndex = -1) -> dict:
        ...
    def metadata_types(self) -> dict:
        ...
    def tensor_data(self, name: str) -> numpy.ndarray:
        """
        The tensor's raw bytes: a read-only uint8 numpy view into the file
        """
    def tensors(self) -> list:
        """
        (name, type name, type id, ne (innermost first), absolute offset, nbytes) per tensor, in file order
        """
    def value(self, key: str, max_items: typing.SupportsInt | typing.SupportsIndex = -1) -> typing.Any:
        ...
    def value_type(self, key: str) -> str:
        ...
    @property
    def alignment(self) -> int:
        ...
    @property
    def data_offset(self) -> int:
        ...
    @property
    def file_size(self) -> int:
        ...
    @property
    def path(self) -> str:
        ...
    @property
    def version(self) -> int:
        ...
class Settings:
    """
    The validated STRATA_* settings of one engine (retention, MTP cells, verification rule, MOCE routing, Metal, expert store, cpu): Settings(env) validates a mapping of STRATA_* variables (a rejected group is a ConfigError naming the variable and its rule); Settings.parse(env) gives (settings, diagnostics) with the rejected groups at their defaults. strata.Config.native() builds one; Engine(settings=...) takes it.
    """
    @staticmethod
    def parse(env: collections.abc.Mapping[str, str]) -> tuple[Settings, list[str]]:
        """
        (settings, diagnostics): each rejected group at its defaults with one diagnostic
        """
    def __init__(self, env: collections.abc.Mapping[str, str] = {}) -> None:
        ...
    def as_dict(self) -> dict:
        """
        The settings as nested dicts, one per group
        """
class EngineCheckpoint:
    """
    Opaque state of an Engine (lengths and write stamps)
    """
    @property
    def n_committed(self) -> int:
        ...
    @property
    def n_past(self) -> int:
        ...
class Engine:
    """
    A GGUF model (strata or qwen3moe) over one sequence: the main window (KV cells indexed by position) and, when the model has one, the MTP drafter, on the cpu, metal-emu or metal backend.
    """
    def __init__(self, path: str, backend: str = 'cpu', n_threads: typing.SupportsInt | typing.SupportsIndex = 0, max_ctx: typing.SupportsInt | typing.SupportsIndex = 0, max_rows: typing.SupportsInt | typing.SupportsIndex = 0, encode_mtp: bool = True, settings: Settings | None = None, expert_page_cache_probe: bool = False, mtp_model: str = '') -> None:
        """
        backend: 'cpu', 'metal-emu' or 'metal'. max_ctx: cells (0 = the model's context, at most 32768 on cpu and 4096 on metal); max_rows: rows per chunk (0 = 512 on cpu, 32 on metal); encode_mtp: encode the drafter's cells while evaluating. settings: the engine's validated Settings (strata.Config.native(): MTP cells, drafter weight format, retention, verification rule, MOCE routing, Metal library and tile, expert store, repack, K/V cell type), given once; None = every setting at its default and the process's repack mode. expert_page_cache_probe: in mmap mode, count uses whose pages were not in the page cache as misses (mincore; the expert benchmark). mtp_model: a deepseek4 model's separate MTP file (llama.cpp's mtp-*.gguf), bound as its drafter. See docs/settings.md, docs/experts.md, docs/metal.md.
        """
    def checkpoint(self) -> EngineCheckpoint:
        ...
    def clear_expert_cache(self) -> None:
        """
        Drop every resident expert (stream mode)
        """
    def commit(self, n: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Keep exactly n cells and mark them committed
        """
    def draft_stats(self) -> dict:
        """
        The drafter's cell bookkeeping (sink_end, run_begin, run_end) and the ledger's checked rows/reads
        """
    def eval(self, tokens: typing.Annotated[numpy.typing.ArrayLike, numpy.int64], start_pos: typing.SupportsInt | typing.SupportsIndex | None = None, logits: str = 'last', draft_from_row: typing.SupportsInt | typing.SupportsIndex | None = None, cut_from_row: typing.SupportsInt | typing.SupportsIndex | None = None) -> typing.Any:
        """
        Run tokens at positions start_pos.. (default n_past; start_pos <= n_past). Returns float32 logits: [V] for logits='last', [n, V] for 'all', None for 'none'. draft_from_row: rows >= it are draft rows of a verification window (MOCE draft flag, docs/experts.md); None = no draft rows.
        """
    def expert_stats(self) -> dict:
        """
        The expert store: mode, I/O path, slots, and counters ('total' since the last reset, 'last_window' of the last main-window run): hits, misses, prefetch_hits, bytes_read, io_bytes, stall_s, evictions, windows, rows (zero on the metal backends: no expert store)
        """
    def expert_totals(self) -> dict:
        """
        expert_stats()['total'] alone (cheap: read every round)
        """
    def final_streams(self, pos: typing.SupportsInt | typing.SupportsIndex = -1) -> numpy.typing.NDArray[numpy.float32]:
        """
        Final main-model streams [n, d] (before the HyperHead) of a position of the last eval
        """
    def mtp_cell_valid(self, cell: typing.SupportsInt | typing.SupportsIndex) -> bool:
        ...
    def mtp_draft(self, next_token: typing.SupportsInt | typing.SupportsIndex, n_steps: typing.SupportsInt | typing.SupportsIndex = 1, pos: typing.SupportsInt | typing.SupportsIndex | None = None, streams: typing.Annotated[numpy.typing.ArrayLike, numpy.float32] | None = None) -> tuple:
        """
        Chained MTP draft from the streams of position pos (default n_past-1; or `streams` [n, d]) and the token at pos+1. Returns (logits [n_steps, Vr] over the restricted vocabulary, token ids [n_steps]).
        """
    def mtp_weight(self, name: str) -> dict:
        """
        One MTP weight as a dict: present, type, repacked, rows, cols, address, data (uint8 [rows, row_bytes] copy; a repacked weight as its plain type and bytes)
        """
    def reset_expert_stats(self) -> None:
        ...
    def restore(self, checkpoint: EngineCheckpoint) -> None:
        ...
    def reuse_prefix(self, held: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], target: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], drafting: bool) -> int:
        """
        Where to start evaluating `target` when the engine holds the tokens `held`: the longest common prefix (at most len(target) - 1), one token less (or 0) when drafting and a drafter cell a later draft row reads would be lost there (engine/sequence.h)
        """
    def rollback(self, n: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Drop back to n cells (n <= n_past)
        """
    def route_trace(self) -> list:
        ...
    def set_route_trace(self, on: bool) -> None:
        """
        Record, per MoE layer of the last window, the router's probabilities, residency map and chosen ids (tests)
        """
    def spec_adaptive_seed(self, stats: dict) -> None:
        """
        Before the first round: start adaptive speculation from the costs of an earlier run on the same model and settings (a spec_adaptive_stats() dict: verify_seconds, draft_step_seconds, plain_seconds). When they say drafting cannot pay, the probe's rounds are plain steps (docs/drafting.md).
        """
    def spec_adaptive_stats(self) -> typing.Any:
        """
        Adaptive speculation's state: chosen draft counts, measured window and draft-step seconds, per-step acceptance, estimated and measured gain over plain decoding; None before the first round.
        """
    def spec_window_cuts(self) -> int:
        """
        Drafts that exact window cuts (STRATA_MOCE_WINDOW_CUT) dropped before verification, since the engine was made.
        """
    def spec_round(self, token: typing.SupportsInt | typing.SupportsIndex, history: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], max_drafts: typing.SupportsInt | typing.SupportsIndex, chained: bool = True, *, policy: decode.SamplingPolicy, rng: decode.Rng, adaptive: bool = False) -> tuple:
        """
        One speculative round for the pending token at position n_past (draft, retain, verify as one window, roll back the rejected cells) under the engine's retention settings and verification rule; a plain step when no draft is kept. history: the tokens the penalties look at, ending with `token` ([] when they are off). Returns (tokens, drafted, verified, accepted, draft_probs). policy, rng and adaptive are keyword arguments. adaptive: verify only as many of max_drafts drafts as the measured costs and acceptance say pay (0 = a plain step; docs/drafting.md).
        """
    @property
    def arch(self) -> str:
        ...
    @property
    def backend(self) -> str:
        ...
    @property
    def has_mtp(self) -> bool:
        ...
    @property
    def hparams(self) -> dict:
        ...
    @property
    def max_ctx(self) -> int:
        ...
    @property
    def max_rows(self) -> int:
        ...
    @property
    def moce(self) -> decode.MoceParams:
        """
        MoceParams of the main window's expert selection
        """
    @moce.setter
    def moce(self, arg1: decode.MoceParams) -> None:
        ...
    @property
    def mtp_requant(self) -> typing.Any:
        ...
    @property
    def mtp_vocab_ids(self) -> numpy.typing.NDArray[numpy.int32]:
        ...
    @property
    def n_committed(self) -> int:
        ...
    @property
    def n_past(self) -> int:
        ...
    @property
    def repack(self) -> dict:
        """
        cpu: what the engine repacked at load (docs/quantization.md): mode, matrices, bytes, seconds, experts_left, paired (layers whose routed gate and up experts lie side by side)
        """
    @property
    def vocab_size(self) -> int:
        ...
def active_isa() -> str:
    """
    The kernel path the kernels dispatch to now (an ISA name, or avx512+amx)
    """
def avx512_vbmi() -> bool:
    """
    Whether the avx512 path's IQ2 / IQ3 kernels use AVX512_VBMI lookups here
    """
def amx_status() -> str:
    """
    Whether AMX tiles are usable here, or the first check that said no (CPUID, XCR0, arch_prctl, probe)
    """
def build_features() -> list[str]:
    """
    ISA features compiled into this build
    """
def force_isa(name: str) -> None:
    """
    Force kernels onto one path (tests, benchmarks): an ISA name or avx512+amx
    """
def inspect_model(path: str, mtp_model: str = '') -> dict:
    """
    Open and validate a model file as an engine would (hyper-parameters, every tensor's name, type and shape), without building an engine: no weights are repacked or read. Returns {'hparams': dict (as Engine.hparams), 'has_mtp': bool}. mtp_model: a deepseek4 model's separate MTP file (llama.cpp's mtp-*.gguf), checked against the model. Raises FormatError / IOError as Engine(path) does.
    """
def metal_device_available() -> bool:
    """
    Whether this build can run the 'metal' backend (macOS with metal-cpp); 'metal-emu' runs everywhere
    """
def prepared_models_alive() -> int:
    """
    How many prepared models (one per file and load settings, shared by every cpu engine in mmap mode opened on them) are alive in this process
    """
def set_log_level(arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...
def set_threads(n: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    Threads of the default pool (0 = all cores)
    """
def supported_isas() -> list[str]:
    ...
def threads() -> int:
    ...
__version__: str = '0.1.0'
