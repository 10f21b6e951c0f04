"""
Decode-loop decision logic: routing, plan, sampling, settings, drafting
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import typing
__all__: list[str] = ['DraftCells', 'MAX_TOP_K', 'MoceParams', 'Rng', 'SamplingPolicy', 'build_plan', 'known_settings', 'parse_settings', 'retain_chained', 'route_row', 'route_window', 'sample_dist', 'sample_logits', 'verify_window']
class MoceParams:
    draft: bool
    def __init__(self, resident_bonus: typing.SupportsFloat | typing.SupportsIndex = 1.0, rank1_scale: typing.SupportsFloat | typing.SupportsIndex = 1.0, protect: typing.SupportsInt | typing.SupportsIndex = 0, draft: bool = False, window_bonus: typing.SupportsFloat | typing.SupportsIndex = 1.0) -> None:
        ...
    @property
    def protect(self) -> int:
        ...
    @protect.setter
    def protect(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def rank1_scale(self) -> float:
        ...
    @rank1_scale.setter
    def rank1_scale(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def resident_bonus(self) -> float:
        ...
    @resident_bonus.setter
    def resident_bonus(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def window_bonus(self) -> float:
        """
        > 1: streaming-aware verification windows (draft rows prefer the experts the window requested)
        """
    @window_bonus.setter
    def window_bonus(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
class SamplingPolicy:
    def __init__(self, temperature: typing.SupportsFloat | typing.SupportsIndex = 0.0, top_k: typing.SupportsInt | typing.SupportsIndex = 0, top_p: typing.SupportsFloat | typing.SupportsIndex = 1.0, min_p: typing.SupportsFloat | typing.SupportsIndex = 0.0, repetition_penalty: typing.SupportsFloat | typing.SupportsIndex = 1.0, presence_penalty: typing.SupportsFloat | typing.SupportsIndex = 0.0, penalty_last_n: typing.SupportsInt | typing.SupportsIndex = -1) -> None:
        ...
    def validate(self) -> None:
        ...
    @property
    def min_p(self) -> float:
        ...
    @min_p.setter
    def min_p(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def penalty_last_n(self) -> int:
        ...
    @penalty_last_n.setter
    def penalty_last_n(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def presence_penalty(self) -> float:
        ...
    @presence_penalty.setter
    def presence_penalty(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def repetition_penalty(self) -> float:
        ...
    @repetition_penalty.setter
    def repetition_penalty(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def temperature(self) -> float:
        ...
    @temperature.setter
    def temperature(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def top_k(self) -> int:
        ...
    @top_k.setter
    def top_k(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def top_p(self) -> float:
        ...
    @top_p.setter
    def top_p(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
class Rng:
    def __init__(self, seed: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
        ...
    def next(self) -> int:
        ...
    def reseed(self, seed: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def set_state(self, state: typing.Annotated[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], "FixedSize(4)"]) -> None:
        ...
    def state(self) -> tuple[int, int, int, int]:
        ...
    def uniform(self) -> float:
        ...
class DraftCells:
    def __init__(self, sink: typing.SupportsInt | typing.SupportsIndex = 64, window: typing.SupportsInt | typing.SupportsIndex = 256) -> None:
        ...
    def check_reads(self, cells: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], pos: typing.SupportsInt | typing.SupportsIndex, chain_step: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
        ...
    def draft_row_cells(self, pos: typing.SupportsInt | typing.SupportsIndex) -> list[int]:
        ...
    def load(self) -> None:
        ...
    def reset(self) -> None:
        ...
    def valid(self, cell: typing.SupportsInt | typing.SupportsIndex) -> bool:
        ...
    def wrote(self, c0: typing.SupportsInt | typing.SupportsIndex, n: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def run(self) -> tuple[int, int]:
        ...
    @property
    def sink_end(self) -> int:
        ...
def build_plan(ids: typing.Annotated[numpy.typing.ArrayLike, numpy.int32], n_experts: typing.SupportsInt | typing.SupportsIndex, resident: typing.Annotated[numpy.typing.ArrayLike, numpy.uint8] | None = None) -> dict:
    """
    MoE plan of a window: groups by expert (resident first), entries in row order
    """
def known_settings() -> list:
    ...
def parse_settings(env: collections.abc.Mapping[str, str], strict: bool = True) -> typing.Any:
    """
    Validate STRATA_* settings from a mapping (Settings(env).as_dict()). strict: the settings dict or ConfigError; otherwise (settings with rejected groups at defaults, diagnostics)
    """
def retain_chained(env: collections.abc.Mapping[str, str], caller_min_p: typing.SupportsFloat | typing.SupportsIndex, probs: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex]) -> int:
    """
    Kept prefix length of a drafted chain under the retention settings in env
    """
def route_row(probs: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], k: typing.SupportsInt | typing.SupportsIndex, resident: typing.Annotated[numpy.typing.ArrayLike, numpy.uint8] | None = None, params: MoceParams = ..., draft_row: bool = False) -> tuple[numpy.typing.NDArray[numpy.int32], numpy.typing.NDArray[numpy.float32]]:
    """
    MOCE top-k of one row: (ids int32[k], weights float32[k])
    """
def route_window(probs: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], k: typing.SupportsInt | typing.SupportsIndex, resident: typing.Annotated[numpy.typing.ArrayLike, numpy.uint8] | None = None, params: MoceParams = ..., verification: bool = False) -> tuple[numpy.typing.NDArray[numpy.int32], numpy.typing.NDArray[numpy.float32]]:
    """
    route_row over every row; with verification=True rows after the first are draft rows (and, with params.window_bonus > 1, routed one after another against the residency plus the window's requests)
    """
def sample_dist(logits: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], policy: SamplingPolicy, history: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] = [], inputs: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] = []) -> numpy.typing.NDArray[numpy.float32]:
    """
    Distribution after top-k, penalties (history ++ inputs), temperature, min-p, top-p
    """
def sample_logits(logits: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], policy: SamplingPolicy, history: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], inputs: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], rng: Rng) -> int:
    ...
def verify_window(logits: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], drafts: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], policy: SamplingPolicy, history: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], rng: Rng, mode: str = 'exact') -> tuple[int, int]:
    """
    (accepted drafts, next token); history ends with the window's first input
    """
MAX_TOP_K: int = 64
