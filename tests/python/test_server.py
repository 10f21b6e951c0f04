"""The OpenAI-compatible server (strata.server) on a real uvicorn on a free loopback port, driven by
the official openai client and raw httpx: completions, chat, streaming, errors, disconnects, prefix
reuse and concurrent clients (each response must equal the same request made alone)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
import uvicorn

import strata
from strata.convert import byte_level_tokenizer, make_random_strata
from strata.server import EngineWorker, create_app
from strata.server import engine as engine_module

VOCAB = 300
TINY = dict(vocab_size=VOCAB, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
            sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
            rope_theta=10000.0, rope_dim=8,
            n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4, hc_sinkhorn_iters=3,
            hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)
TEMPLATE = ("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}[assistant]{% endif %}")


def with_template(writer) -> None:  # noqa: ANN001 - a gguf writer callback
    byte_level_tokenizer(VOCAB)(writer)
    writer.add_chat_template(TEMPLATE)


class Running:
    """uvicorn serving an app in a background thread on 127.0.0.1:<free port>."""

    def __init__(self, worker: EngineWorker) -> None:
        self.worker = worker
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        config = uvicorn.Config(create_app(worker), host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            assert self.thread.is_alive(), "the server thread died"
            time.sleep(0.02)
        self.base = f"http://127.0.0.1:{self.port}"

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base + "/v1", api_key="none", timeout=30, max_retries=0)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.worker.close()


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(TINY, seed=4, path=tmp_path_factory.mktemp("server") / "tiny-chat.gguf",
                              tokenizer=with_template)


@pytest.fixture(scope="module")
def server(model_path: Path) -> Iterator[Running]:
    running = Running(EngineWorker(strata.Model(model_path), sessions=2))
    yield running
    running.stop()


def alone(model_path: Path, prompt: str, max_tokens: int, **sampling: object) -> str:
    """The same request made directly on a fresh session (what the server must reproduce)."""
    session = strata.Model(model_path).session(sampling=strata.SamplingPolicy(**sampling))
    return "".join(session.generate(prompt, max_tokens=max_tokens))


# ------------------------------------------------------------------------------------------ basics
def test_models_health_metrics(server: Running) -> None:
    client = server.client()
    ids = [m.id for m in client.models.list().data]
    assert ids == [server.worker.model_id]
    assert client.models.retrieve(server.worker.model_id).id == server.worker.model_id
    assert httpx.get(server.base + "/health", timeout=5).json()["status"] == "ok"
    text = httpx.get(server.base + "/metrics", timeout=5).text
    for name in ("strata_decode_tokens_per_second", "strata_tokens_per_round", "strata_expert_hits_total",
                 "strata_expert_misses_total", "strata_queue_depth"):
        assert f"{name}{{" in text


def test_completion_matches_session(server: Running, model_path: Path) -> None:
    client = server.client()
    r = client.completions.create(model=server.worker.model_id, prompt="hello world", max_tokens=12,
                                  temperature=0)
    assert r.choices[0].text == alone(model_path, "hello world", 12)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == len("hello world")  # byte-level vocabulary, no BOS
    assert 0 < r.usage.completion_tokens <= 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    echoed = client.completions.create(model=server.worker.model_id, prompt="hello world", max_tokens=12,
                                       temperature=0, echo=True)
    assert echoed.choices[0].text == "hello world" + r.choices[0].text


def test_seeded_sampling_parameters(server: Running, model_path: Path) -> None:
    client = server.client()
    kw = dict(temperature=0.9, top_p=0.9, seed=7, presence_penalty=0.5)
    r = client.completions.create(model=server.worker.model_id, prompt="abc", max_tokens=10,
                                  extra_body={"top_k": 40, "min_p": 0.05}, **kw)
    want = alone(model_path, "abc", 10, temperature=0.9, top_p=0.9, seed=7, presence_penalty=0.5,
                 top_k=40, min_p=0.05)
    assert r.choices[0].text == want


def test_stop_string(server: Running, model_path: Path) -> None:
    full = alone(model_path, "xyz", 20)
    assert len(full) > 4
    stop = full[2:4]
    r = server.client().completions.create(model=server.worker.model_id, prompt="xyz", max_tokens=20,
                                           temperature=0, stop=[stop])
    assert r.choices[0].text == full[: full.index(stop)]
    assert r.choices[0].finish_reason == "stop"


def test_streaming_completion(server: Running, model_path: Path) -> None:
    stream = server.client().completions.create(model=server.worker.model_id, prompt="stream me",
                                                max_tokens=15, temperature=0, stream=True,
                                                stream_options={"include_usage": True})
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            pieces.append(c.text)
            finish = c.finish_reason or finish
    assert "".join(pieces) == alone(model_path, "stream me", 15)
    assert finish in ("stop", "length")
    assert usage is not None and usage.prompt_tokens == len("stream me")


def test_chat_and_streaming_chat(server: Running, model_path: Path) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    session = strata.Model(model_path).session()
    want = "".join(session.chat(messages, max_tokens=10))
    client = server.client()
    r = client.chat.completions.create(model=server.worker.model_id, messages=messages, max_tokens=10,
                                       temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == want
    assert r.usage.prompt_tokens == session.stats.prompt_tokens  # rendered with the GGUF's template
    parts = []
    for chunk in client.chat.completions.create(model=server.worker.model_id, messages=messages,
                                                max_tokens=10, temperature=0, stream=True):
        parts += [c.delta.content or "" for c in chunk.choices]
    assert "".join(parts) == want


@pytest.mark.parametrize("speculative", [False, True])
def test_repeated_prefix_reuses_cells(model_path: Path, speculative: bool) -> None:
    # With speculation the drafter cell at the end of the shared prefix saw the old next token, so the
    # session evaluates one token more to encode it again.
    config = strata.Config(speculative=speculative)
    running = Running(EngineWorker(strata.Model(model_path), config, sessions=2))
    try:
        client = running.client()
        prompt = "a shared prefix of some length, " * 3
        client.completions.create(model=running.worker.model_id, prompt=prompt + "one", max_tokens=3,
                                  temperature=0)
        client.completions.create(model=running.worker.model_id, prompt="unrelated", max_tokens=3,
                                  temperature=0)
        r = client.completions.create(model=running.worker.model_id, prompt=prompt + "two", max_tokens=3,
                                      temperature=0)
        cached = r.usage.prompt_tokens_details.cached_tokens
        assert cached == (len(prompt) - 1 if speculative else len(prompt))
        assert r.choices[0].text == alone(model_path, prompt + "two", 3)
    finally:
        running.stop()


# ------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(("body", "status", "param"), [
    ({"model": "no-such-model", "prompt": "x"}, 404, "model"),
    ({"prompt": "x", "max_tokens": -1}, 400, "max_tokens"),
    ({"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens"),
    ({"prompt": 5}, 400, "prompt"),
    ({"prompt": "x", "temperature": -0.5}, 400, "temperature"),
    ({"prompt": "x", "top_p": 0}, 400, "top_p"),
    ({"prompt": "x", "n": 2}, 400, "n"),
    ({"prompt": "x", "frequency_penalty": 0.5}, 400, "frequency_penalty"),
    ({"prompt": "x", "logprobs": 2}, 400, "logprobs"),
    ({"prompt": "x" * 400}, 400, "prompt"),
    ({"prompt": [1, 2, 100000]}, 400, "prompt"),
    ({}, 400, "prompt"),
])
def test_bad_completion_requests(server: Running, body: dict, status: int, param: str) -> None:
    r = httpx.post(server.base + "/v1/completions", json=body, timeout=10)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    assert err["param"] is not None and err["param"].startswith(param)


def test_errors_through_the_openai_client(server: Running) -> None:
    client = server.client()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=server.worker.model_id,
                                       messages=[{"role": "user", "content": "y" * 400}])
    assert info.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=server.worker.model_id, messages=[])
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=server.worker.model_id, prompt="x", max_tokens=-3)


def test_malformed_json_and_unknown_route(server: Running) -> None:
    r = httpx.post(server.base + "/v1/chat/completions", content=b"{not json",
                   headers={"Content-Type": "application/json"}, timeout=10)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    bad = {"messages": [{"role": "wizard", "content": 1}]}
    r = httpx.post(server.base + "/v1/chat/completions", json=bad, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["param"].startswith("messages")
    r = httpx.get(server.base + "/v1/nothing", timeout=10)
    assert r.status_code == 404 and "error" in r.json()
    # still serving
    ok = server.client().completions.create(model=server.worker.model_id, prompt="ok", max_tokens=2)
    assert ok.usage.completion_tokens > 0


# ------------------------------------------------------------------------- disconnect, concurrency
def test_disconnect_frees_the_slot(server: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    # The tiny model decodes 200 tokens faster than the disconnect can travel, so the generation could
    # end on its own before the server sees the client leave (CI once measured a cancelled count of 0).
    # After each piece the decode thread therefore waits until its job is cancelled (10 s at most):
    # the test then measures what the server does on a disconnect, not which side wins a race.
    post = engine_module.Job._post

    def post_then_hold(job: engine_module.Job, kind: str, value: object) -> None:
        post(job, kind, value)
        if kind == "piece":
            job.cancelled.wait(10)

    monkeypatch.setattr(engine_module.Job, "_post", post_then_hold)
    cancelled_before = server.worker.metrics.requests_cancelled
    body = {"prompt": "long", "max_tokens": 200, "temperature": 0.8, "seed": 7, "stream": True}
    url = server.base + "/v1/completions"
    t_disconnect = time.monotonic()
    with httpx.Client(timeout=10) as http, http.stream("POST", url, json=body) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first[6:])["object"] == "text_completion"
        t_disconnect = time.monotonic()
    # the connection is closed: the server stops that generation and serves the next request at once
    deadline = time.monotonic() + 10
    while server.worker.active and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.worker.active == 0
    assert time.monotonic() - t_disconnect < 5  # noticed by the disconnect, not by the 10 s hold
    monkeypatch.undo()
    t0 = time.monotonic()
    r = server.client().completions.create(model=server.worker.model_id, prompt="next", max_tokens=4,
                                           temperature=0)
    assert r.usage.completion_tokens > 0
    assert time.monotonic() - t0 < 5
    assert server.worker.metrics.requests_cancelled == cancelled_before + 1
    text = httpx.get(server.base + "/metrics", timeout=5).text
    assert 'strata_requests_cancelled_total{model="' in text
    assert _line(text, "requests_cancelled_total").endswith(f" {cancelled_before + 1}\n")


def _line(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"strata_{name}{{")) + "\n"


def test_concurrent_clients_never_mix(server: Running, model_path: Path) -> None:
    requests = [(f"client {c} request {i}: ", 1000 * c + i, 0.0 if (c + i) % 2 == 0 else 0.8)
                for c in range(8) for i in range(5)]
    want = {(p, s): alone(model_path, p, 8, temperature=t, seed=s) for p, s, t in requests}

    def one_client(c: int) -> list[tuple[tuple[str, int], str]]:
        client = server.client()
        out = []
        for prompt, seed, temperature in requests[5 * c: 5 * c + 5]:
            if seed % 2:
                stream = client.completions.create(model=server.worker.model_id, prompt=prompt, max_tokens=8,
                                                   temperature=temperature, seed=seed, stream=True)
                text = "".join(ch.choices[0].text for ch in stream if ch.choices)
            else:
                text = client.completions.create(model=server.worker.model_id, prompt=prompt, max_tokens=8,
                                                 temperature=temperature, seed=seed).choices[0].text
            out.append(((prompt, seed), text))
        return out

    with ThreadPoolExecutor(8) as pool:
        results = [r for rs in pool.map(one_client, range(8)) for r in rs]
    assert len(results) == 40
    for key, text in results:
        assert text == want[key], key


def test_demo_model_chat() -> None:
    worker = EngineWorker(strata.Model(), sessions=1)
    running = Running(worker)
    try:
        r = running.client().chat.completions.create(
            model=worker.model_id, messages=[{"role": "user", "content": "write a python function"}],
            max_tokens=16, temperature=0)
        assert r.choices[0].message.content
        assert r.usage.completion_tokens > 0
        assert r.model == worker.model_id == "strata-demo"
    finally:
        running.stop()


def test_a_deepseek4_model_serves(tmp_path: Path) -> None:
    """The server runs llama.cpp's deepseek4 files too (a tiny converted DeepseekV4ForCausalLM): a
    completion equals the same request made alone on a session."""
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "DeepseekV4ForCausalLM"):
        pytest.skip("transformers without DeepseekV4ForCausalLM (needs >= 5.23)")
    from strata.convert import convert_hf_dir
    from test_deepseek4 import _save, hf_ds4

    path = convert_hf_dir(_save(hf_ds4(seed=3), tmp_path / "hf"), tmp_path / "ds4.gguf", weight_type="F32",
                          tokenizer="bytes")
    running = Running(EngineWorker(strata.Model(path), sessions=1))
    try:
        client = running.client()
        assert [m.id for m in client.models.list().data] == [running.worker.model_id]
        r = client.completions.create(model=running.worker.model_id, prompt="def f(x):", max_tokens=10,
                                      temperature=0)
        assert r.choices[0].text == alone(path, "def f(x):", 10)
        assert r.usage.completion_tokens > 0
    finally:
        running.stop()
