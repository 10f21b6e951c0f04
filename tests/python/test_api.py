"""The Python API (strata.Model, Session, SamplingPolicy, GenerationStats) on tiny random models.

Models are written with strata.convert (random weights, the 300-token byte-level test vocabulary).
Besides plain random models, "agreeing" models scale the blocks' outputs down and make the MTP head
an (almost) copy of the main head, so the drafter's guesses are often right and speculative rounds
accept drafts: that exercises acceptance, partial acceptance and rollback.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import strata
from strata import _strata
from strata.convert import (
    agreeing_strata_tensors,
    byte_level_tokenizer,
    make_random_strata,
    random_strata_tensors,
    write_strata_gguf,
)

VOCAB = 300
EOS = 257  # the byte-level test vocabulary's <|endoftext|>

TINY = dict(vocab_size=VOCAB, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
            sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
            rope_theta=10000.0, rope_dim=8,
            n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4, hc_sinkhorn_iters=3,
            hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)

CHAT_TEMPLATE = ("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}[assistant]{% endif %}")


def tiny(**changes: object) -> dict:
    return {**TINY, **changes}


def agreeing_model(path: Path, scale: float, seed: int = 5, vocab_ids: tuple[int, ...] | None = None) -> Path:
    """Block outputs scaled by `scale`, MTP = identity-ish embedding path + the main head's norm: the
    drafter agrees with the main model more the smaller `scale` is."""
    cfg = tiny(mtp_vocab_ids=vocab_ids)
    t = agreeing_strata_tensors(cfg, scale, seed=seed)
    return write_strata_gguf(t, cfg, path, tokenizer=byte_level_tokenizer(VOCAB))


def eos_model(path: Path) -> Path:
    """A model whose every next token is EOS: the streams stay the embedding (block outputs zero), every
    embedding points along u, and only the EOS row of the head is non-zero (= u)."""
    t = random_strata_tensors(TINY, seed=3)
    for k in list(t):
        if k.endswith(("attn_output.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight")):
            t[k] = np.zeros_like(t[k])
    rng = np.random.default_rng(0)
    u = rng.standard_normal(TINY["d"]).astype(np.float32)
    t["token_embd.weight"] = (u + 0.01 * rng.standard_normal(t["token_embd.weight"].shape)).astype(np.float32)
    t["output_norm.weight"] = np.ones(TINY["d"], np.float32)
    t["output.weight"] = np.zeros_like(t["output.weight"])
    t["output.weight"][EOS] = u
    return write_strata_gguf(t, TINY, path, tokenizer=byte_level_tokenizer(VOCAB))


def with_template(template: str):  # noqa: ANN201 - a gguf writer callback
    base = byte_level_tokenizer(VOCAB)

    def add(writer) -> None:  # noqa: ANN001
        base(writer)
        writer.add_chat_template(template)

    return add


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("api-models")
    return {
        "random": make_random_strata(TINY, seed=1, path=root / "random.gguf"),
        "agree": agreeing_model(root / "agree.gguf", 0.0),
        "partial": agreeing_model(root / "partial.gguf", 0.15),
        "restricted": agreeing_model(root / "restricted.gguf", 0.1, vocab_ids=tuple(range(0, VOCAB, 2))),
        "nomtp": make_random_strata(tiny(mtp=False), seed=2, path=root / "nomtp.gguf"),
        "eos": eos_model(root / "eos.gguf"),
        "chat": make_random_strata(TINY, seed=4, path=root / "chat.gguf",
                                   tokenizer=with_template(CHAT_TEMPLATE)),
        "notok": make_random_strata(TINY, seed=6, path=root / "notok.gguf", tokenizer=None),
    }


@pytest.fixture(scope="module")
def models(paths: dict[str, Path]) -> dict[str, strata.Model]:
    return {name: strata.Model(p) for name, p in paths.items()}


def generate(model: strata.Model, prompt: str | list[int] = "hello world", max_tokens: int = 40,
             config: strata.Config | None = None, **sampling: object) -> tuple[str, strata.Session]:
    session = model.session(config=config, sampling=strata.SamplingPolicy(**sampling))
    return "".join(session.generate(prompt, max_tokens=max_tokens)), session


def generated_ids(session: strata.Session) -> list[int]:
    return list(session.tokens[session.stats.prompt_tokens :])


SPEC = strata.Config(speculative=True)
PLAIN = strata.Config(speculative=False)


# --------------------------------------------------------------------------------------------- Model
def test_model_info_and_repr(models: dict[str, strata.Model], paths: dict[str, Path]) -> None:
    m = models["random"]
    info = m.info()
    assert info.arch == "strata" and m.arch == "strata"
    assert info.vocab_size == VOCAB == m.vocab_size
    assert info.context_length == 256 and info.layers == 2 and info.experts == 8 and info.experts_used == 2
    assert info.has_mtp and info.has_tokenizer and not info.chat_template
    assert info.path == str(paths["random"]) and info.file_size == paths["random"].stat().st_size
    # parameters: every tensor element but the I32 vocab ids
    assert info.parameters == sum(a.size for a in random_strata_tensors(TINY, seed=1).values()) - VOCAB
    assert info.tensor_types == {"F32": info.tensor_types["F32"], "I32": 1}
    text = "\n".join(info.lines())
    assert "architecture: strata" in text and "MTP drafter: yes" in text
    r = repr(m)
    assert "arch=strata" in r and "vocab=300" in r and str(paths["random"]) in r and "params=" in r
    assert models["chat"].info().chat_template
    assert not models["nomtp"].has_mtp and "mtp=no" in repr(models["nomtp"])
    assert m.hparams["hyper_connection_count"] == 4 and m.name == "strata-random-1"


def test_model_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      models: dict[str, strata.Model]) -> None:
    import strata.model as model_module

    monkeypatch.setattr(model_module, "DEMO_MODEL_PATH", tmp_path / "models" / "strata-demo.gguf")
    with pytest.raises(strata.IOFailure, match="demo model is not installed.*--model PATH"):
        strata.Model()
    with pytest.raises(strata.IOFailure, match="nope.gguf: cannot open"):
        strata.Model(tmp_path / "nope.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(strata.FormatError, match="bad.gguf"):
        strata.Model(bad)
    with pytest.raises(strata.InvalidArgument, match="expected a file path"):
        strata.Model(42)  # type: ignore[arg-type]
    with pytest.raises(strata.FormatError, match="no tokenizer"):
        models["notok"].session().generate("hi")


def test_demo_model_default_path_when_installed(monkeypatch: pytest.MonkeyPatch,
                                                paths: dict[str, Path]) -> None:
    import strata.model as model_module

    monkeypatch.setattr(model_module, "DEMO_MODEL_PATH", paths["random"])
    assert strata.Model().path == str(paths["random"])


# ------------------------------------------------------------------------------------- generation
@pytest.mark.parametrize("config", [PLAIN, SPEC], ids=["plain", "speculative"])
def test_pieces_join_to_decoded_ids(models: dict[str, strata.Model], config: strata.Config) -> None:
    m = models["partial"]
    session = m.session(config=config)
    pieces = list(session.generate("hello world", max_tokens=50))
    assert len(pieces) >= 2  # streamed, not one blob
    ids = generated_ids(session)
    assert len(ids) == 50 == session.stats.generated_tokens
    assert "".join(pieces) == m.tokenizer.decode(ids)
    assert session.tokens[: session.stats.prompt_tokens] == tuple(m.tokenizer.encode("hello world"))


def test_greedy_is_deterministic(models: dict[str, strata.Model]) -> None:
    for name in ("random", "partial"):
        a, sa = generate(models[name])
        b, sb = generate(models[name])
        assert a == b and sa.tokens == sb.tokens


@pytest.mark.parametrize("name", ["random", "agree", "partial", "restricted"])
@pytest.mark.parametrize("sampling", [{}, {"repetition_penalty": 1.3, "presence_penalty": 0.5, "top_k": 20},
                                      {"repetition_penalty": 1.2, "penalty_last_n": 4}],
                         ids=["greedy", "penalties", "last-n"])
def test_speculative_greedy_identical_to_plain(models: dict[str, strata.Model], name: str,
                                               sampling: dict) -> None:
    m = models[name]
    plain_text, plain = generate(m, max_tokens=60, config=PLAIN, **sampling)
    for steps in (1, 3, 5):
        config = strata.Config(speculative=True, draft_steps=steps)
        text, spec = generate(m, max_tokens=60, config=config, **sampling)
        assert spec.tokens == plain.tokens and text == plain_text
        st = spec.stats
        assert st.speculative and st.rounds > 0 and len(st.drafted) <= steps
        assert all(a <= d for a, d in zip(st.accepted, st.drafted, strict=True))
        # every token after the first comes from a round (accepted drafts + 1) or a plain step
        assert st.generated_tokens == 1 + st.round_tokens + (st.steps - st.rounds)
    assert not plain.stats.speculative and plain.stats.rounds == 0


def test_speculative_greedy_identical_to_plain_with_f16_cells(models: dict[str, strata.Model]) -> None:
    # The main model's and the drafter's K/V cells in fp16: drafting still changes nothing.
    m = models["agree"]
    plain_text, plain = generate(m, max_tokens=60, config=strata.Config(speculative=False, kv_type="f16"))
    text, spec = generate(m, max_tokens=60, config=strata.Config(speculative=True, kv_type="f16"))
    assert spec.tokens == plain.tokens and text == plain_text
    assert spec.stats.rounds > 0 and sum(spec.stats.accepted) > 0


@pytest.mark.parametrize("name", ["agree", "partial"])
def test_non_chained_drafting(models: dict[str, strata.Model], name: str) -> None:
    m = models[name]
    _, plain = generate(m, max_tokens=60, config=PLAIN)

    def run(chained: bool, **kw: Any) -> strata.Session:
        sampling = {"min_p": kw.pop("min_p")} if "min_p" in kw else {}
        config = strata.Config(speculative=True, draft_chained=chained, **kw)
        _, s = generate(m, max_tokens=60, config=config, **sampling)
        assert s.tokens == plain.tokens  # greedy verification: the plain tokens whatever was drafted
        return s

    # Nothing fails (retention unset, min_p 0): both paths verify the same drafts.
    a, b = run(True), run(False)
    assert a.stats.drafted == b.stats.drafted and a.stats.accepted == b.stats.accepted
    # Retention on: the non-chained path rejects before writing, so it verifies the same prefix.
    a, b = run(True, spec_min_cum_p=0.6), run(False, spec_min_cum_p=0.6)
    assert a.stats.drafted == b.stats.drafted
    # Legacy (unset) with a caller min_p: non-chained appends the failing candidate, then stops.
    a, b = run(True, min_p=0.6), run(False, min_p=0.6)
    assert sum(b.stats.drafted) > sum(a.stats.drafted)


def test_speculation_accepts_drafts(models: dict[str, strata.Model]) -> None:
    _, agree = generate(models["agree"], max_tokens=60, config=SPEC)
    _, partial = generate(models["partial"], max_tokens=60, config=SPEC)
    _, rand = generate(models["random"], max_tokens=60, config=SPEC)
    assert agree.stats.tokens_per_round > 2.5 and agree.stats.acceptance[0] > 0.8
    assert 1.2 < partial.stats.tokens_per_round < agree.stats.tokens_per_round
    assert rand.stats.tokens_per_round < partial.stats.tokens_per_round
    assert len(agree.stats.acceptance) == 3


def test_speculative_default_follows_the_model(models: dict[str, strata.Model]) -> None:
    assert models["random"].session().speculative
    assert not models["nomtp"].session().speculative
    assert not models["random"].session(strata.Config(speculative=False)).speculative
    with pytest.raises(strata.ConfigError, match="no MTP layer"):
        models["nomtp"].session(SPEC)


def test_seeded_sampling(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    for config in (PLAIN, SPEC):
        a, _ = generate(m, config=config, temperature=1.0, seed=1)
        b, _ = generate(m, config=config, temperature=1.0, seed=1)
        c, _ = generate(m, config=config, temperature=1.0, seed=2)
        assert a == b and a != c
    s = m.session(sampling=strata.SamplingPolicy(temperature=1.0))
    assert 0 <= s.seed < 2**64  # a random seed was drawn and is reported


def test_sampled_speculation_with_a_point_mass_is_greedy(models: dict[str, strata.Model]) -> None:
    # top_k = 1 leaves one token with mass 1: exact speculative sampling must then commit exactly the
    # greedy tokens, whatever the random draws.
    m = models["partial"]
    greedy, _ = generate(m, config=PLAIN)
    for mode in ("exact", "greedy"):
        text, s = generate(m, config=strata.Config(speculative=True, spec_sample=mode), temperature=0.9,
                           top_k=1, seed=7)
        assert text == greedy and s.stats.rounds > 0


def test_stop_strings(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    for config in (PLAIN, SPEC):
        full, _ = generate(m, max_tokens=60, config=config)
        stop = full[20:23]
        cut = full.find(stop)
        session = m.session(config=config)
        text = "".join(session.generate("hello world", max_tokens=60, stop=[stop, "\x00never\x00"]))
        assert text == full[:cut]
        assert session.stats.finish_reason == "stop"
        # the context holds the tokens up to the one that completed the stop string
        assert m.tokenizer.decode(generated_ids(session)).find(stop) >= 0
        assert stop not in m.tokenizer.decode(generated_ids(session)[:-1])


def test_stop_string_never_completed_is_flushed(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    full, _ = generate(m, max_tokens=30)
    tail = full[-1:] + "\x01\x02impossible"  # starts like the end of the text, never completes
    text, _ = "".join(m.session().generate("hello world", max_tokens=30, stop=tail)), None
    assert text == full


def test_max_tokens_and_finish_reason(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    for config in (PLAIN, SPEC):
        for n in (1, 2, 7):
            session = m.session(config=config)
            list(session.generate("abc", max_tokens=n))
            assert session.stats.generated_tokens == n and session.stats.finish_reason == "length"
        session = m.session(config=config)
        assert list(session.generate("abc", max_tokens=0)) == []
        assert session.tokens == tuple(m.tokenizer.encode("abc"))
        assert session.stats.generated_tokens == 0 and session.stats.finish_reason == "length"


def test_end_of_generation_token(models: dict[str, strata.Model]) -> None:
    for config in (PLAIN, SPEC):
        session = models["eos"].session(config=config)
        assert "".join(session.generate("abc", max_tokens=20)) == ""
        assert session.stats.finish_reason == "stop" and session.stats.generated_tokens == 1
        assert session.tokens[-1] == EOS


def test_context_limit(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    for config in (strata.Config(context_length=32, speculative=False),
                   strata.Config(context_length=32, speculative=True)):
        session = m.session(config=config)
        assert session.context_length == 32
        list(session.generate("0123456789", max_tokens=100))
        assert len(session.tokens) == 32 and session.stats.finish_reason == "length"
        with pytest.raises(strata.InvalidArgument, match="call reset"):
            list(session.generate("more text"))
        session.reset()
        with pytest.raises(strata.InvalidArgument, match="holds at most 31"):
            list(session.generate("x" * 40))


def test_continuation_matches_a_fresh_session(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    n_first = len(m.tokenizer.encode("hello"))
    for config in (PLAIN, SPEC):
        s = m.session(config=config)
        assert "".join(s.generate("hello", max_tokens=15))
        second = "".join(s.generate(" world", max_tokens=15))
        # the first prompt and reply were kept; the reply's last token was still pending
        assert s.stats.cached_tokens == n_first + 15 - 1
        fresh = m.session(config=config)
        again = "".join(fresh.generate(list(s.tokens[:-15]), max_tokens=15))
        assert again == second and fresh.tokens == s.tokens


def test_empty_prompt_and_token_prompts(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    s = m.session()
    list(s.generate("", max_tokens=3))
    assert s.tokens[0] == EOS  # no BOS in this vocabulary: start from EOS, the document separator
    list(s.generate(max_tokens=3))  # continue where it stopped
    assert len(s.tokens) == 1 + 6
    text, _ = generate(m, [104, 105], max_tokens=5)
    assert text == generate(m, "hi", max_tokens=5)[0]
    with pytest.raises(strata.InvalidArgument, match=r"prompt\[1\]"):
        m.session().generate([1, VOCAB])
    with pytest.raises(strata.InvalidArgument, match="prompt must be"):
        m.session().generate(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(strata.InvalidArgument, match="max_tokens"):
        m.session().generate("x", max_tokens=-1)
    with pytest.raises(strata.InvalidArgument, match="stop"):
        m.session().generate("x", stop=[""])
    with pytest.raises(strata.InvalidArgument, match="sampling must be"):
        m.session().generate("x", sampling={"temperature": 1})  # type: ignore[arg-type]


def test_reset_and_superseded_iterators(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    s = m.session(sampling=strata.SamplingPolicy(temperature=1.0, seed=11))
    first = "".join(s.generate("abc", max_tokens=20))
    s.reset()
    assert s.tokens == () and s.stats.generated_tokens == 0
    assert "".join(s.generate("abc", max_tokens=20)) == first  # RNG restarted from the seed
    it = s.generate("x", max_tokens=20)
    next(it)
    other = s.generate("y", max_tokens=2)
    list(other)
    with pytest.raises(strata.InvalidArgument, match="superseded"):
        list(it)
    # a per-call policy with a seed restarts the RNG: same text as a fresh session with that seed
    s.reset()
    call = "".join(s.generate("abc", max_tokens=20, sampling=strata.SamplingPolicy(temperature=1.0, seed=3)))
    assert call == generate(m, "abc", max_tokens=20, temperature=1.0, seed=3)[0]


def test_stats_are_filled(models: dict[str, strata.Model]) -> None:
    m = models["agree"]
    _, s = generate(m, max_tokens=40, config=SPEC)
    st = s.stats
    assert st.prompt_tokens == len(m.tokenizer.encode("hello world")) == st.prefill_tokens
    assert st.cached_tokens == 0 and st.generated_tokens == 40
    assert st.prefill_seconds > 0 and st.decode_seconds > 0
    assert st.prefill_tokens_per_second > 0 and st.decode_tokens_per_second > 0
    assert st.total_seconds == pytest.approx(st.prefill_seconds + st.decode_seconds)
    assert st.rounds > 0 and st.tokens_per_round == st.round_tokens / st.rounds
    d = st.as_dict()
    assert d["generated_tokens"] == 40 and d["acceptance"] == st.acceptance and d["finish_reason"] == "length"
    summary = st.summary()
    assert "tokens/round" in summary and "tok/s" in summary and "finish: length" in summary
    assert st.kv_type == "int8" and "K/V cells int8" in summary  # the strata format's own cells
    _, p = generate(m, max_tokens=5, config=PLAIN)
    assert "speculative: off" in p.stats.summary() and p.stats.steps == 4


# ------------------------------------------------------------------------------------------- chat
def test_chat_applies_the_template_and_reuses_the_prefix(models: dict[str, strata.Model]) -> None:
    m = models["chat"]
    tok = m.tokenizer
    for config in (PLAIN, SPEC):
        s = m.session(config=config)
        messages = [{"role": "user", "content": "hi there"}]
        reply = "".join(s.chat(messages, max_tokens=12))
        rendered = "[user]hi there\n[assistant]"
        assert tok.apply_chat_template(messages) == rendered
        assert tok.decode(s.tokens[: s.stats.prompt_tokens]) == rendered
        assert reply == tok.decode(generated_ids(s))
        first_tokens = s.tokens
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "more"}]
        second = "".join(s.chat(messages, max_tokens=12))
        # The first turn's cells are reused up to where the re-rendered reply differs from the generated
        # ids (control tokens vanish from the reply's text). With speculation the drafter cell at the end
        # of the shared prefix saw the old next token: one more token is evaluated to encode it again.
        common = next(i for i, (a, b) in enumerate(zip(s.tokens, first_tokens, strict=False)) if a != b)
        if config is PLAIN:
            assert s.stats.cached_tokens == min(common, len(first_tokens) - 1)
        else:
            keep = min(common, len(first_tokens) - 1)
            assert s.stats.cached_tokens in (keep - 1, keep)
        fresh = m.session(config=config)
        assert "".join(fresh.chat(messages, max_tokens=12)) == second and fresh.tokens == s.tokens


def test_rewritten_history_and_the_drafter_cells(models: dict[str, strata.Model]) -> None:
    # The second conversation shares 14 tokens ("[user]hi there") with the first. Cell 13 of the
    # drafter saw the old token 14: inside the drafter's sink the session evaluates again from token 13
    # (13 cached) to encode it with the new one; outside its sink and window the 14 cached tokens are kept.
    m = models["chat"]
    first = [{"role": "user", "content": "hi there"}]
    second = [{"role": "user", "content": "hi there, again"}]
    cases = [(PLAIN, 14), (SPEC, 13), (strata.Config(speculative=True, mtp_sink=0, mtp_window=4), 14)]
    for config, cached in cases:
        s = m.session(config=config)
        list(s.chat(first, max_tokens=10))
        reply = "".join(s.chat(second, max_tokens=10))
        assert s.stats.cached_tokens == cached
        fresh = m.session(config=config)
        assert "".join(fresh.chat(second, max_tokens=10)) == reply and fresh.tokens == s.tokens


def test_chat_without_a_template_uses_chatml(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    s = m.session()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
    list(s.chat(messages, max_tokens=5))
    prompt = m.tokenizer.decode(s.tokens[: s.stats.prompt_tokens])
    assert prompt == "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n" \
                     "<|im_start|>assistant\n"
    with pytest.raises(strata.InvalidArgument, match="messages"):
        s.chat("not a list")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------- perplexity
def test_perplexity_matches_logits(models: dict[str, strata.Model], paths: dict[str, Path]) -> None:
    m = models["partial"]
    text = "def f(x):\n    return x * 2\n" * 3
    ids = m.tokenizer.encode(text)
    eng = _strata.Engine(str(paths["partial"]), max_ctx=256, encode_mtp=False)
    logits = eng.eval(ids, logits="all").astype(np.float64)
    lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    nll = lse[:-1] - logits[np.arange(len(ids) - 1), ids[1:]]
    want = float(np.exp(nll.mean()))
    seen = []
    got = m.perplexity(text, progress=seen.append)
    assert got.perplexity == pytest.approx(want, rel=1e-9) and got.tokens_scored == len(ids) - 1
    assert sum(seen) == len(ids) and got.windows == 1
    # windows of 16 tokens: each window from an empty cache, its first token not scored
    win = m.perplexity(ids, context=16)
    total, n = 0.0, 0
    for w0 in range(0, len(ids), 16):
        w = ids[w0 : w0 + 16]
        if len(w) < 2:
            continue
        eng.rollback(0)
        lg = eng.eval(w, logits="all").astype(np.float64)
        lse = np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1)) + lg.max(1)
        total += float((lse[:-1] - lg[np.arange(len(w) - 1), w[1:]]).sum())
        n += len(w) - 1
    assert win.tokens_scored == n and win.perplexity == pytest.approx(np.exp(total / n), rel=1e-9)
    with pytest.raises(strata.InvalidArgument, match="at least 2 tokens"):
        m.perplexity("a")


# ----------------------------------------------------------------------------------------- policy
@pytest.mark.parametrize(("field", "value"), [
    ("temperature", -0.1), ("temperature", float("nan")), ("temperature", "hot"), ("top_k", -1),
    ("top_k", 1.5),
    ("top_p", 0.0), ("top_p", 1.5), ("min_p", -0.1), ("min_p", 2.0), ("repetition_penalty", 0.0),
    ("presence_penalty", float("inf")), ("penalty_last_n", -2), ("seed", -1), ("seed", 2**64), ("seed", 1.0),
    ("top_k", True),
])
def test_sampling_policy_validation(field: str, value: object) -> None:
    with pytest.raises(strata.InvalidArgument, match=f"SamplingPolicy.{field}") as exc:
        strata.SamplingPolicy(**{field: value})
    assert isinstance(exc.value, ValueError)


def test_sampling_policy_is_frozen_and_replaceable() -> None:
    p = strata.SamplingPolicy(temperature=0.7, top_p=0.9, seed=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.temperature = 1.0  # type: ignore[misc]
    q = p.replace(temperature=0.0)
    assert q.greedy and not p.greedy and q.seed == 3 and q.top_p == 0.9
    with pytest.raises(strata.InvalidArgument, match="top_p"):
        p.replace(top_p=0)
    assert p.native().top_p == pytest.approx(0.9) and p.resolve_seed() == 3


# ------------------------------------------------------------------------------------- threading
def test_sessions_in_threads_match_sequential_runs(models: dict[str, strata.Model]) -> None:
    m = models["partial"]
    prompts = ["alpha", "beta", "gamma"]
    want = [generate(m, p, max_tokens=25)[0] for p in prompts]
    got: list[str | None] = [None] * len(prompts)

    def work(i: int) -> None:
        got[i] = generate(m, prompts[i], max_tokens=25)[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


def test_import_strata_does_not_import_torch() -> None:
    code = ("import sys, strata, strata.cli.__main__; "
            "print(len([k for k in sys.modules if k.split('.')[0] == 'torch']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_long_prompt_streams_in_chunks(models: dict[str, strata.Model]) -> None:
    # 600 prompt tokens: more than one 512-row prefill chunk; the drafter's cells must be encoded
    # across the chunk boundary for speculation to stay identical to plain decoding.
    m = models["partial"]
    prompt = [int(t) for t in np.random.default_rng(0).integers(0, 256, 600)]
    texts = []
    for spec in (False, True):
        s = m.session(strata.Config(speculative=spec, context_length=700))
        texts.append("".join(s.generate(prompt, max_tokens=30)))
        assert s.stats.prefill_tokens == 600 and s.stats.generated_tokens == 30
    assert texts[0] == texts[1]
