"""`zcode-host serve` against real clients: requests and httpx (Python),
curl for the error cases, promtool for /metrics; tests/serve/openai_sdk_test.mjs
drives it with OpenAI's own SDK. The reference for every generated text is
`zcode-host generate` on the same checkpoint with the same options."""
import concurrent.futures as cf
import json
import math
import os
import shutil
import signal
import subprocess
import time

import httpx
import pytest
import requests

from conftest import API_KEY, MODEL, Served, auth, generate_cli, post

PROMPTS = ["alpha beta", "the river", "héllo", "sky light stone", "", "naïve 日本 gamma delta the a", "beta",
           "river river light"]


def completion(server, prompt, **kw):
    body = {"model": MODEL, "prompt": prompt, **kw}
    r = post(server, "/v1/completions", body)
    assert r.status_code == 200, r.text
    return r.json()


def stream_events(server, path, body):
    """The data payloads of a server-sent event stream, each decoded as strict UTF-8."""
    out = []
    with requests.post(server.url + path, json=body, headers=auth(), stream=True, timeout=60) as r:
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"].startswith("text/event-stream")
        buf = b""
        for chunk in r.iter_content(chunk_size=None):
            buf += chunk
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                assert event.startswith(b"data: "), event
                out.append(event[6:].decode("utf-8"))  # strict: a split character would raise
    assert out[-1] == "[DONE]"
    return out


def streamed_text(server, prompt, **kw):
    events = stream_events(server, "/v1/completions", {"model": MODEL, "prompt": prompt, "stream": True, **kw})
    pieces = [json.loads(e)["choices"][0]["text"] for e in events[:-1]]
    for p in pieces:
        assert "\ufffd" not in p, pieces
    return "".join(pieces), json.loads(events[-2])["choices"][0]["finish_reason"]


def test_models_health_and_api_key(server):
    r = requests.get(server.url + "/v1/models", headers=auth(), timeout=10)
    assert r.status_code == 200
    assert [m["id"] for m in r.json()["data"]] == [MODEL]
    assert requests.get(server.url + "/health", timeout=10).json() == {"status": "ok"}
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = requests.get(server.url + "/v1/models", headers=headers, timeout=10)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_api_key"


@pytest.fixture(scope="module")
def greedy_refs(checkpoint):
    return {p: generate_cli(checkpoint, p, "--strategy", "greedy", "--max-new-tokens", "24") for p in PROMPTS}


def test_greedy_alone_equals_generate(server, greedy_refs):
    """Mix 1: one request at a time."""
    assert any(ord(c) > 127 for t in greedy_refs.values() for c in t), "the corpus should give multi-byte text"
    for p in PROMPTS:
        r = completion(server, p, max_tokens=24, temperature=0)
        assert r["choices"][0]["text"] == greedy_refs[p], p


def test_greedy_concurrent_equals_generate(server, greedy_refs):
    """Mix 2: all prompts at once (8 slots: one batch, prompts prefilled in chunks of 5)."""
    with cf.ThreadPoolExecutor(len(PROMPTS)) as ex:
        got = list(ex.map(lambda p: completion(server, p, max_tokens=24, temperature=0), PROMPTS))
    for p, r in zip(PROMPTS, got):
        assert r["choices"][0]["text"] == greedy_refs[p], p


def test_greedy_among_streams_and_sampling_equals_generate(server, greedy_refs):
    """Mix 3: greedy requests, half of them streamed, beside sampling requests
    with longer outputs and n = 2 (more sequences than slots: some wait)."""
    def greedy(i):
        p = PROMPTS[i]
        if i % 2:
            return p, streamed_text(server, p, max_tokens=24, temperature=0)[0]
        return p, completion(server, p, max_tokens=24, temperature=0)["choices"][0]["text"]

    def noise(i):
        completion(server, "stone " * (i + 1), max_tokens=60, temperature=1.0, n=2)
        return None

    with cf.ThreadPoolExecutor(12) as ex:
        futs = [ex.submit(noise, i) for i in range(3)] + [ex.submit(greedy, i) for i in range(len(PROMPTS))]
        results = [f.result() for f in futs]
    for res in results[3:]:
        p, text = res
        assert text == greedy_refs[p], p


def test_sampling_with_seed_equals_generate(server, checkpoint):
    ref = generate_cli(checkpoint, "the", "--strategy", "sample", "--temperature", "0.9", "--top-p", "0.95",
                       "--top-k", "40", "--seed", "11", "--max-new-tokens", "30")
    with cf.ThreadPoolExecutor(4) as ex:
        noise = [ex.submit(completion, server, "alpha", max_tokens=40, temperature=0.7) for _ in range(3)]
        r = completion(server, "the", max_tokens=30, temperature=0.9, top_p=0.95, top_k=40, seed=11)
        [f.result() for f in noise]
    assert r["choices"][0]["text"] == ref


def test_n_with_seed_is_reproducible(server, checkpoint):
    a = completion(server, "sky", max_tokens=20, n=3, seed=5)
    b = completion(server, "sky", max_tokens=20, n=3, seed=5)
    assert [c["text"] for c in a["choices"]] == [c["text"] for c in b["choices"]]
    assert [c["index"] for c in a["choices"]] == [0, 1, 2]
    # Choice j draws from seed + j: choice 0 is `generate --seed 5`.
    ref = generate_cli(checkpoint, "sky", "--strategy", "sample", "--temperature", "1", "--seed", "5",
                       "--max-new-tokens", "20")
    assert a["choices"][0]["text"] == ref
    assert a["usage"]["completion_tokens"] >= 3


def tokenize(*args):
    """`zcode-host tokenize` on the checkpoint's tokenizer (GPT-2's, with the
    specials of the model's 4 experts)."""
    r = subprocess.run([os.environ["ZCODE_HOST"], "tokenize", "--tokenizer",
                        os.path.join(os.environ["ZCODE_SOURCE_DIR"], "assets", "hf", "gpt2"), "--moe-experts", "4",
                        *args], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def token_id(text):
    """The tokenizer's id of `text` (one token)."""
    ids = tokenize(text).split()
    assert len(ids) == 1, ids
    return int(ids[0])


def tokenizer_info(key):
    return next(int(line.split()[1]) for line in tokenize("--info").splitlines() if line.startswith(key + ":"))


def test_penalties_equal_generate_alone_and_in_a_batch(server, checkpoint):
    """frequency_penalty, presence_penalty and logit_bias follow generate's
    step 0: the greedy text is `zcode-host generate`'s with the same flags,
    alone and among other requests."""
    prompts = ["river river light", "alpha beta", "the"]
    river, eos = token_id(" river"), tokenizer_info("eos_id")
    # The corpus rarely repeats a word, so a positive penalty shows only once
    # <eos> is held off (the model then loops); negative ones make it repeat.
    kinds = {
        "frequency": ({"frequency_penalty": 1.5, "logit_bias": {str(eos): -100}},
                      ["--frequency-penalty", "1.5", "--logit-bias", f"{eos}=-100"]),
        "negative": ({"frequency_penalty": -2, "presence_penalty": -2},
                     ["--frequency-penalty=-2", "--presence-penalty=-2"]),
        "mixed": ({"presence_penalty": -0.3, "frequency_penalty": 0.8, "logit_bias": {str(river): -100, "13": 2.5}},
                  ["--presence-penalty=-0.3", "--frequency-penalty", "0.8", "--logit-bias", f"{river}=-100",
                   "--logit-bias", "13=2.5"]),
    }
    refs = {}
    for p in prompts:
        greedy = generate_cli(checkpoint, p, "--strategy", "greedy", "--max-new-tokens", "24")
        no_eos = generate_cli(checkpoint, p, "--strategy", "greedy", "--max-new-tokens", "24", "--logit-bias",
                              f"{eos}=-100")
        for kind, (_, flags) in kinds.items():
            refs[(p, kind)] = generate_cli(checkpoint, p, "--strategy", "greedy", "--max-new-tokens", "24", *flags)
            # Each setting changes the text, or this test would prove nothing.
            assert refs[(p, kind)] != (no_eos if kind == "frequency" else greedy), (p, kind)
        assert " river" not in refs[(p, "mixed")]

    def ask(p, kind):
        return completion(server, p, max_tokens=24, temperature=0, **kinds[kind][0])["choices"][0]["text"]

    for key in refs:
        assert ask(*key) == refs[key], key
    with cf.ThreadPoolExecutor(8) as ex:
        noise = [ex.submit(completion, server, "stone " * (i + 1), max_tokens=40, temperature=0.9, n=2,
                           presence_penalty=0.5) for i in range(2)]
        got = {key: ex.submit(ask, *key) for key in refs}
        [f.result() for f in noise]
    assert {k: f.result() for k, f in got.items()} == refs
    # Chat too, with the documented template.
    chat_ref = generate_cli(checkpoint, "User: alpha beta\n\nAssistant:", "--strategy", "greedy", "--max-new-tokens",
                            "20", "--stop", "\n\nUser:", "--frequency-penalty=-2", "--presence-penalty=-2")
    r = post(server, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "alpha beta"}],
                                             "max_tokens": 20, "temperature": 0, "frequency_penalty": -2,
                                             "presence_penalty": -2})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == chat_ref
    # Seeded sampling with a penalty: choice 0 is `generate --strategy sample`'s.
    ref = generate_cli(checkpoint, "sky", "--strategy", "sample", "--temperature", "0.9", "--seed", "8",
                       "--max-new-tokens", "20", "--presence-penalty", "1.2", "--logit-bias", "13=-5")
    got = completion(server, "sky", max_tokens=20, temperature=0.9, seed=8, presence_penalty=1.2, logit_bias={"13": -5})
    assert got["choices"][0]["text"] == ref


def test_logit_bias_forces_a_token_and_logprobs_stay_the_models(server, checkpoint):
    plain = completion(server, "alpha beta", max_tokens=1, temperature=0, logprobs=5)["choices"][0]
    word = " the" if plain["text"] == " river" else " river"
    forced_id = token_id(word)
    r = completion(server, "alpha beta", max_tokens=6, temperature=0, logprobs=5, logit_bias={str(forced_id): 100})
    c = r["choices"][0]
    assert c["text"] == word * 6 and c["logprobs"]["tokens"] == [word] * 6
    # The first step's distribution is the model's, not the biased one: the
    # same top alternatives as without the bias, and the forced token no
    # likelier than the greedy one.
    assert c["logprobs"]["top_logprobs"][0] == plain["logprobs"]["top_logprobs"][0]
    assert c["logprobs"]["token_logprobs"][0] <= plain["logprobs"]["token_logprobs"][0] < 0
    assert generate_cli(checkpoint, "alpha beta", "--strategy", "greedy", "--max-new-tokens", "6",
                        "--logit-bias", f"{forced_id}=100") == word * 6
    # Bad values are 400s naming logit_bias and the key.
    vocab = tokenizer_info("vocab_size")
    for bias, needle in (({str(vocab): 1}, f"key '{vocab}' is outside the vocabulary [0, {vocab})"),
                         ({"x1": 1}, "key 'x1' is not a token id"),
                         ({"5": 100.5}, "key '5': 100.500000 is outside [-100, 100]")):
        e = post(server, "/v1/completions", {"model": MODEL, "prompt": "a", "logit_bias": bias})
        assert e.status_code == 400, e.text
        err = e.json()["error"]
        assert err["param"] == "logit_bias" and needle in err["message"], err


def test_logprobs_are_the_same_bits_alone_and_in_a_batch(server):
    alone = completion(server, "gamma delta", max_tokens=12, temperature=0, logprobs=3)["choices"][0]["logprobs"]
    with cf.ThreadPoolExecutor(6) as ex:
        noise = [ex.submit(completion, server, p, max_tokens=30, temperature=0.8) for p in PROMPTS[:5]]
        batched = completion(server, "gamma delta", max_tokens=12, temperature=0, logprobs=3)["choices"][0]["logprobs"]
        [f.result() for f in noise]
    assert alone == batched  # batch-invariant decoding: not even the last bits differ
    for lp, top in zip(alone["token_logprobs"], alone["top_logprobs"]):
        # Keys are token texts: two tokens whose texts are equal (bytes of one
        # character, shown as U+FFFD) share a key in this legacy format.
        assert lp <= 0 and 1 <= len(top) <= 3
        assert lp >= max(top.values())  # greedy takes the most likely token
        assert sum(math.exp(v) for v in top.values()) <= 1 + 1e-9
    assert alone["text_offset"][0] == 0


def test_streaming_equals_non_streaming_whole_characters(server, greedy_refs):
    for p in ("héllo", "naïve 日本 gamma delta the a"):
        text, finish = streamed_text(server, p, max_tokens=24, temperature=0)
        assert text == greedy_refs[p]
        assert finish in ("stop", "length")
    events = stream_events(server, "/v1/completions", {"model": MODEL, "prompt": "beta", "max_tokens": 5,
                                                       "temperature": 0, "stream": True,
                                                       "stream_options": {"include_usage": True}})
    usage = json.loads(events[-2])
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] <= 5


def test_stop_strings_across_token_boundaries(server):
    r = completion(server, "alpha beta", max_tokens=24, temperature=0, logprobs=0)
    text, toks = r["choices"][0]["text"], r["choices"][0]["logprobs"]["tokens"]
    # A stop string made of the end of one token and the start of the next.
    i = next(i for i in range(1, len(toks) - 1) if len(toks[i]) >= 2 and len(toks[i + 1]) >= 2)
    stop = toks[i][-2:] + toks[i + 1][:2]
    cut = text.find(stop)
    assert 0 <= cut
    got = completion(server, "alpha beta", max_tokens=24, temperature=0, stop=[stop, "zzzz"])["choices"][0]
    assert (got["text"], got["finish_reason"]) == (text[:cut], "stop")
    assert streamed_text(server, "alpha beta", max_tokens=24, temperature=0, stop=stop) == (text[:cut], "stop")


def test_chat_completions_use_the_documented_template(server, checkpoint):
    messages = [{"role": "system", "content": "the sky"}, {"role": "user", "content": "alpha beta"}]
    ref = generate_cli(checkpoint, "System: the sky\n\nUser: alpha beta\n\nAssistant:", "--strategy", "greedy",
                       "--max-new-tokens", "20", "--stop", "\n\nUser:")
    r = post(server, "/v1/chat/completions", {"model": MODEL, "messages": messages, "max_tokens": 20,
                                             "temperature": 0})
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    assert c["message"] == {"role": "assistant", "content": ref}
    events = stream_events(server, "/v1/chat/completions",
                           {"model": MODEL, "messages": messages, "max_tokens": 20, "temperature": 0, "stream": True})
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks) == ref
    # httpx, a second client library, sees the same answer.
    with httpx.Client(timeout=60) as client:
        h = client.post(server.url + "/v1/chat/completions", headers=auth(),
                        json={"model": MODEL, "messages": messages, "max_tokens": 20, "temperature": 0,
                              "logprobs": True, "top_logprobs": 2})
    assert h.status_code == 200
    hc = h.json()["choices"][0]
    assert hc["message"]["content"] == ref
    for e in hc["logprobs"]["content"]:
        assert len(e["top_logprobs"]) == 2
        assert e["logprob"] == e["top_logprobs"][0]["logprob"] >= e["top_logprobs"][1]["logprob"]
    # The tokens' bytes, joined, spell the reply (then what a stop string cut).
    assert b"".join(bytes(e["bytes"]) for e in hc["logprobs"]["content"]).startswith(ref.encode())


def curl(server, path, data, *extra):
    r = subprocess.run(["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", "POST", server.url + path,
                        "-H", f"Authorization: Bearer {API_KEY}", "-H", "Content-Type: application/json",
                        "--data-binary", data, *extra], capture_output=True, timeout=30)
    body, code = r.stdout.decode().rsplit("\n", 1)
    return int(code), body


@pytest.mark.parametrize("path,data,status,needle", [
    ("/v1/completions", '{"model": "served", "prompt": "a", ', 400, "not valid JSON"),
    ("/v1/completions", '[1, 2]', 400, "must be a JSON object"),
    ("/v1/completions", '{"model": "served", "prompt": "a", "colour": 1}', 400, "unknown field 'colour'"),
    ("/v1/completions", '{"model": "served", "prompt": "a", "max_tokens": "ten"}', 400, "expected an integer"),
    ("/v1/completions", '{"model": "served", "prompt": "a", "temperature": 3}', 400, "'temperature'"),
    ("/v1/completions", '{"model": "served", "prompt": 7}', 400, "'prompt'"),
    ("/v1/completions", '{"model": "served", "prompt": "a", "n": 99}', 400, "'n'"),
    ("/v1/completions", '{"model": "served", "prompt": [70000]}', 400, "outside the vocabulary"),
    ("/v1/completions", '{"model": "served", "prompt": "a", "max_tokens": 1000}', 400, "max_tokens 1000"),
    ("/v1/completions", '{"model": "served", "prompt": "' + "river " * 200 + '"}', 400, "context_length_exceeded"),
    ("/v1/completions", '{"model": "served", "prompt": "' + "river " * 60 + '", "max_tokens": 100}', 400,
     "maximum context length is 128"),
    ("/v1/completions", '{"model": "served", "prompt": "a", "stream_options": {"include_usage": true}}', 400,
     "only allowed with"),
    ("/v1/completions", '{"model": "served", "prompt": "a", "frequency_penalty": 2.5}', 400, "'frequency_penalty'"),
    ("/v1/completions", '{"model": "served", "prompt": "a", "logit_bias": {"-3": 1}}', 400, "key '-3'"),
    ("/v1/chat/completions", '{"model": "served", "messages": [{"role": "user", "content": "x"}], '
     '"presence_penalty": "high"}', 400, "'presence_penalty': expected a number"),
    ("/v1/chat/completions", '{"model": "served", "messages": [{"role": "user", "content": "x"}], '
     '"logit_bias": {"70000": 5}}', 400, "outside the vocabulary"),
    ("/v1/completions", '{"model": "other", "prompt": "a"}', 404, "model_not_found"),
    ("/v1/chat/completions", '{"model": "served", "messages": []}', 400, "'messages'"),
    ("/v1/chat/completions", '{"model": "served", "messages": [{"role": "robot", "content": "x"}]}', 400,
     "is not one of"),
    ("/v1/chat/completions", '{"model": "served", "messages": [{"role": "user", "content": "x"}], "tools": []}',
     400, "unknown field 'tools'"),
    ("/v1/embeddings", '{}', 404, "no such endpoint"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 40 and not v.startswith("{") else None)
def test_bad_requests_get_openai_errors(server, path, data, status, needle):
    code, body = curl(server, path, data)
    assert code == status, body
    err = json.loads(body)["error"]
    assert needle in body, body
    assert set(err) == {"message", "type", "param", "code"}


def test_body_over_the_limit_is_413(server):
    code, body = curl(server, "/v1/completions", '{"model": "served", "prompt": "' + "a" * 80000 + '"}')
    assert code == 413
    assert "larger than the server's limit" in json.loads(body)["error"]["message"]


def test_metrics_pass_promtool(server):
    completion(server, "alpha", max_tokens=4, temperature=0)
    # Odd paths, unauthenticated: counted under a fixed label, not their bytes.
    for path in ("/v1/%ff%22%0a%5c", "/v1/x1", "/v1/x2"):
        assert requests.get(server.url + path, timeout=10).status_code == 401
    text = requests.get(server.url + "/metrics", timeout=10).text
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package, installed by install-deps.sh) is missing"
    r = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    samples = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
               if line and not line.startswith("#")}
    assert samples["zcode_serve_generated_tokens_total"] >= 4
    assert samples['zcode_serve_requests_total{code="200",endpoint="/v1/completions"}'] >= 1
    assert samples["zcode_serve_time_to_first_token_seconds_count"] >= 1
    assert "zcode_serve_inter_token_latency_seconds_bucket" in text
    assert samples["zcode_serve_queue_depth"] == 0
    assert samples['zcode_serve_requests_total{code="401",endpoint="other"}'] >= 3
    assert "x1" not in text


def metric(url, name):
    for line in requests.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split(" ")[1])
    raise KeyError(name)


def test_streams_are_woken_once_per_step_and_only_streams(server):
    # The scheduler's on_step_end wakes the streams' HTTP threads (one futex
    # wake a step, core/src/serve/change_signal.h). Unwired, streams would
    # still arrive, by a 200 ms poll: the counter is what tells.
    wakes, steps = "zcode_serve_stream_wakes_total", "zcode_serve_decode_steps_total"
    w0, s0 = metric(server.url, wakes), metric(server.url, steps)
    completion(server, "alpha", max_tokens=6, temperature=0)
    w1, s1 = metric(server.url, wakes), metric(server.url, steps)
    assert s1 > s0 and w1 == w0, "a non-streaming request woke the streams"
    events = stream_events(server, "/v1/completions",
                           {"model": MODEL, "prompt": "alpha", "max_tokens": 6, "temperature": 0, "stream": True})
    w2, s2 = metric(server.url, wakes), metric(server.url, steps)
    assert len(events) >= 2
    assert 1 <= w2 - w1 <= s2 - s1, (w2 - w1, s2 - s1)


def test_full_queue_is_429_and_a_client_that_leaves_frees_its_slot(checkpoint):
    s = Served(checkpoint, "--slots", "1", "--max-queue", "1")
    try:
        body = {"model": MODEL, "prompt": "alpha", "max_tokens": 100, "temperature": 1.0, "seed": 1}

        def one(_):
            return requests.post(s.url + "/v1/completions", json=body, timeout=60).status_code

        with cf.ThreadPoolExecutor(8) as ex:
            codes = list(ex.map(one, range(8)))
        assert codes.count(429) >= 1 and codes.count(200) >= 2 and set(codes) <= {200, 429}, codes

        # A streaming client that reads one event and goes away. <eos> is held
        # off, so the request would run all 110 tokens if its slot were kept
        # ("alpha" with seed 1 otherwise ends by itself after 8).
        eos = tokenizer_info("eos_id")
        before = metric(s.url, "zcode_serve_generated_tokens_total")
        with requests.post(s.url + "/v1/completions",
                           json={**body, "stream": True, "max_tokens": 110, "logit_bias": {str(eos): -100}},
                           stream=True, timeout=60) as r:
            next(r.iter_content(chunk_size=None))
        deadline = time.monotonic() + 10
        while metric(s.url, "zcode_serve_running_sequences") != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert metric(s.url, "zcode_serve_running_sequences") == 0
        assert metric(s.url, "zcode_serve_generated_tokens_total") - before < 110
        # The slot is free: the next request runs at once.
        assert requests.post(s.url + "/v1/completions", json={**body, "max_tokens": 3}, timeout=10).status_code == 200
    finally:
        assert s.stop() == 0, s.stderr()


def test_timeout_is_504_or_an_error_event(checkpoint):
    s = Served(checkpoint, "--slots", "2", "--timeout", "0.005")
    try:
        body = {"model": MODEL, "prompt": "the " * 40, "max_tokens": 80, "temperature": 1.0}
        r = requests.post(s.url + "/v1/completions", json=body, timeout=60)
        assert r.status_code == 504 and r.json()["error"]["type"] == "timeout", r.text
        events = stream_events(s, "/v1/completions", {**body, "stream": True})
        assert json.loads(events[-2])["error"]["type"] == "timeout"
    finally:
        assert s.stop() == 0, s.stderr()


def test_sigterm_drains_in_flight_requests(checkpoint):
    s = Served(checkpoint, "--slots", "4")
    body = {"model": MODEL, "prompt": "stone", "max_tokens": 110, "temperature": 1.0, "seed": 3, "stream": True}
    pieces = []
    with requests.post(s.url + "/v1/completions", json=body, stream=True, timeout=60) as r:
        it = r.iter_lines()
        first = next(it)
        assert first.startswith(b"data: ")
        s.proc.send_signal(signal.SIGTERM)
        pieces.append(first)
        pieces.extend(line for line in it if line)
    assert pieces[-1] == b"data: [DONE]"
    last = json.loads(pieces[-2][6:])
    assert last["choices"][0]["finish_reason"] in ("length", "stop")
    assert s.stop() == 0
    assert "finishing the requests in flight" in s.stderr()


def test_openai_sdk_node_client(server, checkpoint):
    """OpenAI's own SDK (npm `openai` 4.x, fetched by scripts/fetch-assets.sh) as the client."""
    node = shutil.which("node")
    sdk = os.path.join(os.environ.get("NODE_PATH", ""), "openai", "package.json")
    if not node or not os.path.exists(sdk):
        pytest.skip(f"needs node and the npm package openai ({sdk}): run scripts/fetch-assets.sh")
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([node, os.path.join(here, "openai_sdk_client.cjs"), server.url, API_KEY, MODEL],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    got = json.loads(r.stdout.decode("utf-8"))
    ref = generate_cli(checkpoint, "alpha beta", "--strategy", "greedy", "--max-new-tokens", "24")
    chat_ref = generate_cli(checkpoint, "System: the sky\n\nUser: alpha beta\n\nAssistant:", "--strategy", "greedy",
                            "--max-new-tokens", "20", "--stop", "\n\nUser:")
    assert got["models"] == [MODEL]
    assert got["completion"] == ref and got["completion_streamed"] == ref
    assert got["completion_finish"] in ("stop", "length")
    assert got["chat"] == chat_ref and got["chat_streamed"] == chat_ref and got["chat_role"] == "assistant"
    assert got["error_status"] == 404 and got["error_code"] == "model_not_found"


def raw_post(url, path, body, headers=()):
    """One HTTP/1.1 POST over a plain socket; returns (status, body bytes)."""
    import socket
    from urllib.parse import urlparse
    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + "".join(h + "\r\n" for h in headers)
        if not any(h.lower().startswith("transfer-encoding") for h in headers):
            head += f"Content-Length: {len(body)}\r\n"
        sock.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def test_hostile_bodies_get_errors_never_a_crash(checkpoint):
    s = Served(checkpoint, "--slots", "2", "--max-queue", "2")
    try:
        # 120,000 nested arrays (240 KB): a recursive parser overflows its stack here.
        deep = b'{"model":"served","prompt":' + b"[" * 120000 + b"]" * 120000 + b"}"
        code, body = raw_post(s.url, "/v1/completions", deep)
        assert code == 400, body[:200]
        # Invalid UTF-8 is refused, and the error itself is valid JSON in UTF-8.
        code, body = raw_post(s.url, "/v1/completions", b'{"model":"ser\xffved","prompt":"a"}')
        assert code == 400 and json.loads(body.decode("utf-8"))["error"]["type"] == "invalid_request_error"
        # A chunked upload is refused before its body is read (the size limit needs a length).
        code, body = raw_post(s.url, "/v1/completions", b"5\r\nhello\r\n0\r\n\r\n",
                              ["Transfer-Encoding: chunked"])
        assert code == 411, body
        # A field twice, a NUL inside a role, more sequences than the server holds.
        for b, needle in ((b'{"model":"served","prompt":"a","max_tokens":2,"max_tokens":-5}', b"appears twice"),
                          (b'{"model":"served","messages":[{"role":"user\\u0000x","content":"a"}]}', b"not one of"),
                          (b'{"model":"served","prompt":["a","b"],"n":3,"max_tokens":2}', b"exceed what this server")):
            code, body = raw_post(s.url, "/v1/chat/completions" if b"messages" in b else "/v1/completions", b)
            assert code == 400 and needle in body, body
        # A NUL inside content is content, not its end.
        full = requests.post(s.url + "/v1/chat/completions", timeout=30, json={
            "model": MODEL, "messages": [{"role": "user", "content": "a\u0000 sky river stone"}], "max_tokens": 1})
        cut = requests.post(s.url + "/v1/chat/completions", timeout=30, json={
            "model": MODEL, "messages": [{"role": "user", "content": "a"}], "max_tokens": 1})
        assert full.json()["usage"]["prompt_tokens"] > cut.json()["usage"]["prompt_tokens"]
        # A temperature that underflows 1/T samples as greedy, not garbage.
        g = requests.post(s.url + "/v1/completions", timeout=30, json={
            "model": MODEL, "prompt": "the sky", "max_tokens": 8, "temperature": 0}).json()["choices"][0]["text"]
        t = requests.post(s.url + "/v1/completions", timeout=30, json={
            "model": MODEL, "prompt": "the sky", "max_tokens": 8, "temperature": 5e-324, "seed": 1}).json()
        assert t["choices"][0]["text"] == g
        assert requests.get(s.url + "/health", timeout=10).json() == {"status": "ok"}
    finally:
        assert s.stop() == 0, s.stderr()


def test_sigterm_exits_even_with_a_client_dribbling_headers(checkpoint):
    import socket
    from urllib.parse import urlparse
    s = Served(checkpoint, "--slots", "2")
    u = urlparse(s.url)
    sock = socket.create_connection((u.hostname, u.port), timeout=60)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    for _ in range(25):  # a header line a second, never the blank line
        if s.proc.poll() is not None:
            break
        try:
            sock.sendall(b"X-Slow: 1\r\n")
        except OSError:
            break
        time.sleep(1)
    assert s.stop(timeout=30) == 0
    assert time.time() - t0 < 30
    sock.close()
