"""Request bodies of the OpenAI endpoints, validated by pydantic (a bad value is a 400 naming the field).

Unknown fields are ignored, as OpenAI-compatible servers do; fields strata cannot honour faithfully are
accepted only at their neutral value (see docs/server.md, "Parameters").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

Float = Annotated[float, Field(strict=True)]
TokenIds = list[Annotated[int, Field(strict=True, ge=0)]]

MAX_STOPS = 16


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: StrictBool = False


class SamplingFields(BaseModel):
    """What /v1/completions and /v1/chat/completions share."""

    model_config = ConfigDict(extra="ignore")

    model: StrictStr | None = None
    max_tokens: Annotated[int, Field(strict=True, ge=0)] | None = None
    temperature: Annotated[float, Field(strict=True, ge=0.0, le=100.0)] | None = None
    top_p: Annotated[float, Field(strict=True, gt=0.0, le=1.0)] | None = None
    top_k: Annotated[int, Field(strict=True, ge=0)] | None = None
    min_p: Annotated[float, Field(strict=True, ge=0.0, le=1.0)] | None = None
    repetition_penalty: Annotated[float, Field(strict=True, gt=0.0)] | None = None
    presence_penalty: Annotated[float, Field(strict=True, ge=-2.0, le=2.0)] | None = None
    frequency_penalty: Annotated[float, Field(strict=True, ge=-2.0, le=2.0)] | None = None
    seed: Annotated[int, Field(strict=True, ge=0, lt=2**64)] | None = None
    stop: StrictStr | Annotated[list[StrictStr], Field(max_length=MAX_STOPS)] | None = None
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: StrictInt | None = None
    logit_bias: dict[str, Any] | None = None
    user: StrictStr | None = None


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
