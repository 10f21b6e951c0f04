"""Hostile and careless clients against a real ``python -m strata.cli serve`` subprocess on 127.0.0.1
(docs/server.md, "Limits"): invalid text, NaN, too many stops, oversized bodies, API keys, abandoned
requests and a prompt that tokenizes for seconds and must not stall /health. Every loop is bounded by
a deadline, and no server may log a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from strata.convert import make_random_strata
from strata.convert.tokenizer_keys import gpt2_byte_symbols

VOCAB = 300
TEMPLATE = ("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}[assistant]{% endif %}")
# Big enough that a long generation takes seconds (so an abandoned one is visibly still running),
# small enough to write and load in a moment.
SLOW = dict(vocab_size=VOCAB, d=256, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=64, gated=True,
            sink_count=2, sliding_window=64, indexer_heads=2, indexer_dim=16, indexer_top_k=32,
            rope_theta=10000.0, rope_dim=16, n_experts=8, n_experts_used=2, expert_ffn=256, shared_ffn=256,
            hc_count=4, hc_sinkhorn_iters=3, hc_eps=1e-6, rms_eps=1e-6, mtp=False, mtp_vocab_ids=None,
            context_length=16384)
KEY = "s3cret-key"


def never_ending_tokenizer(writer: Any) -> None:
    """A byte-level vocabulary with no end-of-generation token: a generation runs to max_tokens."""
    space = gpt2_byte_symbols()[ord(" ")]
    tokens = gpt2_byte_symbols() + [space + space]
    tokens += [f"<|reserved_{i}|>" for i in range(VOCAB - len(tokens))]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 257 + [3] * (VOCAB - 257))
    writer.add_token_merges([f"{space} {space}"])
    writer.add_chat_template(TEMPLATE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """``serve`` in a subprocess; stopped (and waited for) when the test module ends."""

    def __init__(self, model: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "strata.cli", "serve", "--model", str(model), "--port", str(self.port),
               "--log-level", "warning", "--speculative", "off", *args]
        self.log = tempfile.TemporaryFile()  # the server's stderr (a pipe could fill and block it)
        self.proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                                     stderr=self.log)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, f"serve exited: {self.stderr()}"
            assert time.monotonic() < deadline, "serve did not start within 60 s"
            try:
                if httpx.get(self.base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)

    def post(self, route: str, body: Any, **kw: Any) -> httpx.Response:
        return httpx.post(self.base + route, json=body, timeout=kw.pop("timeout", 30), **kw)

    def metric(self, name: str, **kw: Any) -> float:
        text = httpx.get(self.base + "/metrics", timeout=5, **kw).text
        for line in text.splitlines():
            if line.startswith(f"strata_{name}{{"):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no metric strata_{name}")

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def stop(self) -> str:
        """Stop the server; its stderr, which must hold no traceback (abandoned requests included)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        text = self.stderr()
        self.log.close()
        assert "Traceback" not in text, text[-3000:]
        return text


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(SLOW, seed=5, path=tmp_path_factory.mktemp("probe") / "slow.gguf",
                              tokenizer=never_ending_tokenizer)


@pytest.fixture(scope="module")
def server(model: Path) -> Iterator[Served]:
    s = Served(model)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def guarded(model: Path) -> Iterator[Served]:
    """Body limit and API key from the environment (the flags are tested on the command line below)."""
    s = Served(model, env={"STRATA_MAX_BODY": "64K", "STRATA_API_KEY": KEY})
    yield s
    s.stop()


def error_of(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error"}, body
    return body["error"]  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------ invalid text
@pytest.mark.parametrize(("raw", "param"), [
    ('{"prompt": "a\\ud800", "max_tokens": 2}', "prompt"),
    ('{"prompt": ["ok", "b\\udfff"], "max_tokens": 2}', "prompt[1]"),
    ('{"prompt": "x", "stop": ["\\ud83d"], "max_tokens": 2}', "stop[0]"),
])
def test_lone_surrogate_completion_is_400(server: Served, raw: str, param: str) -> None:
    r = httpx.post(server.base + "/v1/completions", content=raw, headers={"content-type": "application/json"},
                   timeout=30)
    assert r.status_code == 400, r.text
    err = error_of(r)
    assert "lone surrogate" in err["message"] and err["param"] == param


def test_lone_surrogate_chat_is_400(server: Served) -> None:
    raw = '{"messages": [{"role": "user", "content": "hi \\udc80 there"}], "max_tokens": 2}'
    r = httpx.post(server.base + "/v1/chat/completions", content=raw,
                   headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    err = error_of(r)
    assert "lone surrogate U+DC80 at character 3" in err["message"]
    assert err["param"] == "messages[0].content"


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_temperature(server: Served, value: str) -> None:
    raw = '{"prompt": "x", "max_tokens": 1, "temperature": ' + value + '}'
    r = httpx.post(server.base + "/v1/completions", content=raw, headers={"content-type": "application/json"},
                   timeout=30)
    assert r.status_code == 400
    err = error_of(r)
    assert err["param"] == "temperature" and "finite" in err["message"], err


def test_too_many_stop_strings(server: Served) -> None:
    r = server.post("/v1/completions", {"prompt": "x", "max_tokens": 1, "stop": [f"s{i}" for i in range(17)]})
    assert r.status_code == 400
    err = error_of(r)
    assert err["param"] == "stop" and "at most 16 stop strings" in err["message"], err
    sixteen = [f"s{i}" for i in range(16)]
    ok = server.post("/v1/completions", {"prompt": "x", "max_tokens": 1, "stop": sixteen})
    assert ok.status_code == 200


# ----------------------------------------------------------------------------- abandoned requests
def _wait_idle(server: Served, since: float, limit: float) -> float:
    """Seconds from ``since`` until no request is being decoded (fails after ``limit``)."""
    while server.metric("active_requests") != 0:
        assert time.monotonic() - since < limit, f"the abandoned request still runs after {limit} s"
        time.sleep(0.01)
    return time.monotonic() - since


@pytest.mark.parametrize("stream", [False, True])
def test_abandoned_request_is_cancelled(server: Served, stream: bool) -> None:
    body = json.dumps({"prompt": "run on and on", "max_tokens": 12000, "temperature": 0,
                       "stream": stream}).encode()
    cancelled = server.metric("requests_cancelled_total")
    # A raw connection: a non-streaming answer has no headers before its end, so no client API would
    # return while it runs.
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
        conn.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        deadline = time.monotonic() + 30
        while server.metric("active_requests") == 0:  # wait until it decodes
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.3)  # some pieces have been made
        if stream:
            assert conn.recv(65536).startswith(b"HTTP/1.1 200")
        gone = time.monotonic()
    # leaving the block closed the connection
    assert _wait_idle(server, gone, 5.0) < 1.0  # within 0.1 s of the disconnect, plus the poll's margin
    assert server.metric("requests_cancelled_total") == cancelled + 1
    # The slot is free: a short request is answered at once (not after 12000 abandoned tokens).
    t = time.monotonic()
    r2 = server.post("/v1/completions", {"prompt": "next", "max_tokens": 4, "temperature": 0})
    assert r2.status_code == 200 and time.monotonic() - t < 5.0


def test_five_abandoned_chats_leave_no_work(server: Served) -> None:
    body = {"messages": [{"role": "user", "content": "go"}], "max_tokens": 12000, "temperature": 0}
    for _ in range(5):
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.base + "/v1/chat/completions", json=body, timeout=0.3)
    gone = time.monotonic()
    assert _wait_idle(server, gone, 10.0) < 1.5
    assert server.metric("queue_depth") == 0


# ------------------------------------------------------------------------ a huge prompt, /health
def test_health_answers_while_a_huge_prompt_tokenizes(model: Path) -> None:
    big = Served(model, "--max-body", "16M")
    try:
        # 1 MB: with this vocabulary of bytes every byte is a token, so it tokenizes for seconds (as
        # 8 MB does with a real vocabulary), long enough that a blocked event loop would show.
        prompt = "word " * ((1 << 20) // 5)
        result: dict[str, Any] = {}

        def send() -> None:
            try:
                result["r"] = big.post("/v1/completions", {"prompt": prompt, "max_tokens": 1}, timeout=300)
            except Exception as exc:  # noqa: BLE001 - reported by the main thread
                result["r"] = exc

        sender = threading.Thread(target=send)
        sender.start()
        worst = 0.0
        polls = 0
        while sender.is_alive():
            polls += 1
            t = time.monotonic()
            assert httpx.get(big.base + "/health", timeout=30).status_code == 200
            worst = max(worst, time.monotonic() - t)
            time.sleep(0.02)
        sender.join()
        r = result["r"]
        assert isinstance(r, httpx.Response), repr(r)
        assert r.status_code == 400 and error_of(r)["code"] == "context_length_exceeded"
        assert polls > 10 and worst < 1.0, f"/health took {worst:.2f} s while the prompt was tokenized"
    finally:
        big.stop()


# ---------------------------------------------------------------------------- body limit, API key
def test_body_over_the_limit_is_413(guarded: Served) -> None:
    headers = {"authorization": f"Bearer {KEY}"}
    r = guarded.post("/v1/completions", {"prompt": "x" * (65 << 10)}, headers=headers)
    assert r.status_code == 413
    assert error_of(r)["code"] == "request_too_large" and "65536 bytes" in error_of(r)["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts what arrives
        yield b'{"prompt": "'
        for _ in range(80):
            yield b"y" * 1024
        yield b'"}'

    r = httpx.post(guarded.base + "/v1/completions", content=chunks(), timeout=30,
                   headers={**headers, "content-type": "application/json"})
    assert r.status_code == 413
    ok = guarded.post("/v1/completions", {"prompt": "x" * 1000, "max_tokens": 1}, headers=headers)
    assert ok.status_code == 200


def test_api_key(guarded: Served) -> None:
    assert httpx.get(guarded.base + "/health", timeout=5).status_code == 200  # open, as in llama-server
    body = {"prompt": "x", "max_tokens": 1}
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": KEY}):
        r = guarded.post("/v1/completions", body, headers=headers)
        assert r.status_code == 401, headers
        assert error_of(r)["code"] == "invalid_api_key"
    assert httpx.get(guarded.base + "/v1/models", timeout=5).status_code == 401
    assert httpx.get(guarded.base + "/metrics", timeout=5).status_code == 401
    bearer = {"authorization": f"Bearer {KEY}"}
    assert guarded.post("/v1/completions", body, headers=bearer).status_code == 200
    assert guarded.post("/v1/completions", body, headers={"x-api-key": KEY}).status_code == 200
    import openai

    client = openai.OpenAI(base_url=guarded.base + "/v1", api_key=KEY, timeout=30, max_retries=0)
    assert client.completions.create(model=client.models.list().data[0].id, prompt="x", max_tokens=1).choices
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=guarded.base + "/v1", api_key="nope", max_retries=0).models.list()


def test_flags_and_bad_sizes(model: Path) -> None:
    s = Served(model, "--max-body", "2K", "--api-key", "flag-key")
    try:
        r = s.post("/v1/completions", {"prompt": "z" * 4000}, headers={"authorization": "Bearer flag-key"})
        assert r.status_code == 413 and "2048 bytes" in error_of(r)["message"]
        assert s.post("/v1/completions", {"prompt": "z"}).status_code == 401
    finally:
        s.stop()
    for args, env, what in ((["--max-body", "lots"], {}, "--max-body: expected a size"),
                            ([], {"STRATA_MAX_BODY": "9" * 5000}, "STRATA_MAX_BODY: expected a size"),
                            (["--max-body", "12"], {}, "below the minimum")):
        p = subprocess.run([sys.executable, "-m", "strata.cli", "serve", "--model", str(model), *args],
                           env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and what in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert len(p.stderr) < 300


def test_guards_are_plain_json(guarded: Served) -> None:
    r = guarded.post("/v1/completions", {"prompt": "x"})
    assert r.headers["content-type"] == "application/json"
    assert json.loads(r.content)["error"]["type"] == "invalid_request_error"
