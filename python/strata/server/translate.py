"""OpenAI request fields -> what a strata session runs: prompt token ids, max_tokens, stops, policy.

Every check that depends on the model (unknown model id, token ids outside the vocabulary, a prompt
that does not fit the context) happens here, before the request is queued, as an :class:`APIError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strata.errors import StrataError
from strata.sampling import SamplingPolicy
from strata.server.errors import APIError
from strata.server.schemas import ChatCompletionRequest, CompletionRequest, SamplingFields
from strata.tokenizer import Tokenizer

DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default for /v1/completions
CHATML_END = "<|im_end|>"


def _first_surrogate(text: str) -> int:
    """Index of the first lone surrogate in ``text`` (-1 when it is valid Unicode text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return -1


def check_unicode(req: SamplingFields) -> None:
    """Every string of the request must be valid Unicode: JSON can carry a lone surrogate ("\\ud800"),
    which no tokenizer and no UTF-8 response can represent (400 naming the field and position)."""
    def walk(value: Any, path: str) -> None:
        if isinstance(value, str):
            at = _first_surrogate(value)
            if at >= 0:
                raise APIError(400, f"'{path}' is not valid Unicode text: a lone surrogate "
                                    f"U+{ord(value[at]):04X} at character {at}", param=path)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k, path)
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    walk(req.model_dump(exclude_none=True), "")


def check_model(req: SamplingFields, model_id: str) -> None:
    if req.model is not None and req.model != model_id:
        raise APIError(404, f"The model '{req.model}' does not exist; this server serves '{model_id}'",
                       type="not_found_error", param="model", code="model_not_found")


def _unsupported(param: str, why: str) -> APIError:
    return APIError(400, f"'{param}' {why}", param=param, code="unsupported_parameter")


def check_unsupported(req: SamplingFields) -> None:
    """Fields with no faithful mapping onto strata are refused unless neutral (docs/server.md)."""
    if req.n not in (None, 1):
        raise _unsupported("n", "must be 1: this server generates one choice per request")
    if req.frequency_penalty not in (None, 0.0):
        raise _unsupported("frequency_penalty", "is not supported (strata has no per-occurrence penalty); "
                           "use presence_penalty or repetition_penalty")
    if req.logit_bias:
        raise _unsupported("logit_bias", "is not supported")
    if isinstance(req, CompletionRequest):
        if req.logprobs is not None:
            raise _unsupported("logprobs", "is not supported")
        if req.best_of not in (None, 1):
            raise _unsupported("best_of", "must be 1")
        if req.suffix:
            raise _unsupported("suffix", "is not supported")
    if isinstance(req, ChatCompletionRequest):
        if req.logprobs or req.top_logprobs:
            raise _unsupported("logprobs", "is not supported")
        if req.tools:
            raise _unsupported("tools", "are not supported")


def sampling_policy(req: SamplingFields) -> SamplingPolicy:
    """temperature defaults to 1 as in the OpenAI API; presence_penalty maps directly."""
    try:
        return SamplingPolicy(
            temperature=1.0 if req.temperature is None else float(req.temperature),
            top_p=1.0 if req.top_p is None else float(req.top_p),
            top_k=req.top_k or 0,
            min_p=req.min_p or 0.0,
            repetition_penalty=1.0 if req.repetition_penalty is None else float(req.repetition_penalty),
            presence_penalty=req.presence_penalty or 0.0,
            seed=req.seed,
        )
    except StrataError as exc:
        raise APIError(400, str(exc)) from None


def stop_list(req: SamplingFields) -> list[str]:
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    for s in stops:
        if not s:
            raise APIError(400, "'stop' strings must not be empty", param="stop")
    return stops


def check_fits(ids: Sequence[int], context_length: int, param: str) -> None:
    if len(ids) >= context_length:
        raise APIError(400, f"This model's context holds {context_length} tokens; the prompt needs "
                       f"{len(ids)} (at most {context_length - 1} leave room to generate). "
                       "Shorten the prompt.",
                       param=param, code="context_length_exceeded")


def completion_prompt(req: CompletionRequest, tok: Tokenizer, vocab: int) -> tuple[list[int], str]:
    """(token ids with BOS as Session.generate adds it to an empty session, the prompt text for echo)."""
    prompt: Any = req.prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
        if len(prompt) != 1:
            raise _unsupported("prompt", "must be a single prompt (batches of prompts are not supported)")
        prompt = prompt[0]
    if isinstance(prompt, str):
        ids = _encode(tok, prompt, False, "prompt") if prompt else []
        text = prompt
    else:
        for i, t in enumerate(prompt):
            if t >= vocab:
                raise APIError(400, f"prompt[{i}] = {t} is not a token id in [0, {vocab})", param="prompt")
        ids = list(prompt)
        text = tok.decode(ids)
    start: list[int] = []
    if tok.add_bos and tok.bos_id is not None:
        start = [tok.bos_id]
    elif not ids:
        first = tok.bos_id if tok.bos_id is not None else tok.eos_id
        if first is None:
            raise APIError(400, "the prompt is empty and the model has no BOS or EOS token to start from",
                           param="prompt")
        start = [first]
    return start + ids, text


def _encode(tok: Tokenizer, text: str, add_special: bool, param: str) -> list[int]:
    try:
        return tok.encode(text, add_special=add_special, parse_special=True)
    except StrataError as exc:  # text the tokenizer cannot take (check_unicode catches it earlier)
        raise APIError(400, f"'{param}' cannot be tokenized: {exc}", param=param) from None


def message_text(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        if part.type != "text" or part.text is None:
            raise APIError(400, f"messages[{index}].content: only text parts are supported, "
                                f"got '{part.type}'",
                           param=f"messages[{index}].content")
        texts.append(part.text)
    return "".join(texts)


def chat_prompt(req: ChatCompletionRequest, tok: Tokenizer) -> tuple[list[int], list[str]]:
    """(token ids of the rendered conversation plus the assistant prompt, extra stop strings) — the same
    rendering as Session.chat: the GGUF's chat template, ChatML when it has none."""
    messages = [{"role": m.role, "content": message_text(m.content, i)} for i, m in enumerate(req.messages)]
    try:
        text = tok.apply_chat_template(messages, add_generation_prompt=True)
    except StrataError as exc:
        raise APIError(400, f"the chat template cannot render these messages: {exc}",
                       param="messages") from None
    ids = _encode(tok, text, True, "messages")
    if tok.bos_id is not None and len(ids) >= 2 and ids[0] == ids[1] == tok.bos_id:
        ids = ids[1:]  # the template wrote BOS itself
    extra = [CHATML_END] if tok.chat_template is None and tok.token_to_id(CHATML_END) is None else []
    return ids, extra
