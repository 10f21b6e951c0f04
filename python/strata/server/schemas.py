"""Request bodies of the OpenAI endpoints, validated by pydantic (a bad value is a 400 naming the field).

Unknown fields are ignored, as OpenAI-compatible servers do; fields strata cannot honour faithfully are
accepted only at their neutral value (see docs/server.md, "Parameters").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

Float = Annotated[float, Field(strict=True)]
TokenIds = list[Annotated[int, Field(strict=True, ge=0)]]

MAX_STOPS = 16
Penalty = Annotated[float, Field(strict=True, ge=-2.0, le=2.0, allow_inf_nan=False)]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: StrictBool = False


class SamplingFields(BaseModel):
    """What /v1/completions and /v1/chat/completions share."""

    model_config = ConfigDict(extra="ignore")

    model: StrictStr | None = None
    max_tokens: Annotated[int, Field(strict=True, ge=0)] | None = None
    # allow_inf_nan=False: NaN (which Python's JSON parser accepts) is "not a finite number", not "> 100".
    temperature: Annotated[float, Field(strict=True, ge=0.0, le=100.0, allow_inf_nan=False)] | None = None
    top_p: Annotated[float, Field(strict=True, gt=0.0, le=1.0, allow_inf_nan=False)] | None = None
    top_k: Annotated[int, Field(strict=True, ge=0)] | None = None
    min_p: Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    repetition_penalty: Annotated[float, Field(strict=True, gt=0.0, allow_inf_nan=False)] | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    seed: Annotated[int, Field(strict=True, ge=0, lt=2**64)] | None = None
    stop: StrictStr | list[StrictStr] | None = None
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: StrictInt | None = None
    logit_bias: dict[str, Any] | None = None
    user: StrictStr | None = None

    @field_validator("stop")
    @classmethod
    def _few_stops(cls, v: str | list[str] | None) -> str | list[str] | None:
        # A length limit inside the union would be reported against its 'str' branch ("stop.str").
        if isinstance(v, list) and len(v) > MAX_STOPS:
            raise ValueError(f"at most {MAX_STOPS} stop strings are allowed, got {len(v)}")
        return v


class CompletionRequest(SamplingFields):
    prompt: StrictStr | TokenIds | list[StrictStr] | list[TokenIds]
    echo: StrictBool = False
    logprobs: StrictInt | None = None
    best_of: StrictInt | None = None
    suffix: StrictStr | None = None


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: StrictStr
    text: StrictStr | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: StrictStr | list[TextPart] | None = None
    name: StrictStr | None = None


class ChatCompletionRequest(SamplingFields):
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(strict=True, ge=0)] | None = None
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = None
    tools: list[Any] | None = None
