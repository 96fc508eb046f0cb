# End-to-end tests: the SMG gateway (`smg launch`, PyPI) in front of tandemd (demo model), driven
# by the official `openai` client: chat and completions, streaming and not, client disconnects.
#
# TANDEM_UPDATE_EXAMPLES=1 also rewrites docs/examples/chat-completion.json (the README's example).
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import openai
import pytest
from conftest import DEMO_GGUF, REPO, free_port, tandem_cli_json
from smg_grpc_proto import vllm_engine_pb2 as pb

MODEL = "tandem-demo"
CHAT = [{"role": "user", "content": "Who made the heaven and the earth?"}]
COMPLETION_PROMPT = "In the beginning"
GATEWAY_START_S = 90


def smg_binary():
    found = Path(sys.executable).with_name("smg")
    return str(found) if found.exists() else shutil.which("smg")


@contextlib.contextmanager
def gateway(daemons, log_dir, *extra_args, model=MODEL, env=None):
    """The SMG gateway in front of `daemons` (one daemon or a list of replicas), once it lists
    `model`; yields its base URL. `env`: extra environment variables of the gateway."""
    daemons = daemons if isinstance(daemons, list) else [daemons]
    info = daemons[0].vllm.GetModelInfo(pb.GetModelInfoRequest(), timeout=5,
                                        metadata=daemons[0].metadata())
    port, prom = free_port(), free_port()
    log_path = Path(log_dir) / "smg.log"
    log = open(log_path, "wb")
    argv = [smg_binary(), "launch", "--host", "127.0.0.1", "--port", str(port), "--worker-urls",
            *(f"grpc://{d.address}" for d in daemons), "--policy", "round_robin",
            "--tokenizer-path", info.tokenizer_path, "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(prom), *extra_args]
    gw_env = {**os.environ, "NO_COLOR": "1", "HF_HUB_OFFLINE": "1", **(env or {})}
    gw = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                          env=gw_env)
    base = f"http://127.0.0.1:{port}"
    key = next((extra_args[i + 1] for i, a in enumerate(extra_args) if a == "--api-key"), None)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        deadline = time.monotonic() + GATEWAY_START_S
        models = []
        while time.monotonic() < deadline and model not in models:
            assert gw.poll() is None, f"smg exited with {gw.returncode}:\n{log_path.read_text()}"
            try:
                request = urllib.request.Request(f"{base}/v1/models", headers=headers)
                with urllib.request.urlopen(request, timeout=2) as r:
                    models = [m["id"] for m in json.loads(r.read())["data"]]
            except OSError:
                pass
            time.sleep(0.2)
        assert model in models, f"gateway never listed {model}:\n{log_path.read_text()}"
        yield base
    finally:
        if gw.poll() is None:
            os.killpg(gw.pid, signal.SIGTERM)
            try:
                gw.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(gw.pid, signal.SIGKILL)
                gw.wait()
        log.close()


@pytest.fixture(scope="module")
def stack(module_tandemd, tmp_path_factory):
    """tandemd (demo model) with the SMG gateway in front; yields (daemon, gateway base URL)."""
    daemon = module_tandemd.start()
    with gateway(daemon, tmp_path_factory.mktemp("smg")) as base:
        yield daemon, base


@pytest.fixture
def client(stack):
    _, base = stack
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)


def stream_text(stream, field):
    parts, finish = [], None
    for event in stream:
        for choice in event.choices:
            piece = choice.delta.content if field == "delta" else choice.text
            parts.append(piece or "")
            finish = choice.finish_reason or finish
    return "".join(parts), finish


def test_chat_completion_stream_equals_unary(client):
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=CHAT,
                                                           temperature=0, max_tokens=40)
    full = raw.parse()
    choice = full.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in ("length", "stop")
    assert full.usage.completion_tokens <= 40
    assert full.usage.prompt_tokens > 0
    text, finish = stream_text(client.chat.completions.create(
        model=MODEL, messages=CHAT, temperature=0, max_tokens=40, stream=True), "delta")
    assert text == choice.message.content
    assert finish == choice.finish_reason
    if os.environ.get("TANDEM_UPDATE_EXAMPLES") == "1":
        example = {
            "request": {"model": MODEL, "messages": CHAT, "temperature": 0, "max_tokens": 40},
            "response": json.loads(raw.text),
        }
        path = REPO / "docs/examples/chat-completion.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(example, indent=2) + "\n")


def test_completion_stream_equals_unary_and_tandem_generate(client):
    full = client.completions.create(model=MODEL, prompt=COMPLETION_PROMPT, temperature=0,
                                     max_tokens=30)
    choice = full.choices[0]
    assert choice.text
    assert full.usage.completion_tokens <= 30
    text, finish = stream_text(client.completions.create(
        model=MODEL, prompt=COMPLETION_PROMPT, temperature=0, max_tokens=30, stream=True),
        "text")
    assert text == choice.text
    assert finish == choice.finish_reason
    # The gateway tokenizes with HF tokenizers; `tandem generate` with our own tokenizer and
    # engine in one process gives the same greedy text.
    cli = tandem_cli_json("--model", str(DEMO_GGUF), "--prompt", COMPLETION_PROMPT,
                          "--max-tokens", "30")
    assert choice.text == cli["text"]


def test_stop_string_through_gateway(client):
    full = client.completions.create(model=MODEL, prompt=COMPLETION_PROMPT, temperature=0,
                                     max_tokens=30)
    words = [m for m in re.finditer(r"[A-Za-z]{3,}", full.choices[0].text) if m.start() >= 5]
    stop = words[0].group(0)
    cut = client.completions.create(model=MODEL, prompt=COMPLETION_PROMPT, temperature=0,
                                    max_tokens=30, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == full.choices[0].text[:words[0].start()]


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=CHAT, max_tokens=2)


def test_client_disconnect_frees_sequence(stack, client):
    daemon, _ = stack
    before = daemon.metrics_text()
    stream = client.completions.create(model=MODEL, prompt=COMPLETION_PROMPT, temperature=0,
                                       max_tokens=480, stream=True,
                                       extra_body={"ignore_eos": True})
    got = 0
    for event in stream:
        got += 1
        if got == 3:
            break
    assert got == 3
    assert daemon.server_info().active_requests == 1
    stream.close()  # drops the HTTP connection mid-stream
    assert daemon.wait_idle(timeout=5) == 0
    after = daemon.metrics_text()

    def total(text, outcome):
        m = re.search(r'^tandem_requests_total\{outcome="%s"\} (\S+)$' % outcome, text, re.M)
        return float(m.group(1)) if m else 0.0

    # The daemon ended it as aborted (cancel or Abort RPC), not as a finished request.
    assert total(after, "abort") == total(before, "abort") + 1
    assert total(after, "length") == total(before, "length")


def test_chat_logprobs_through_gateway(client):
    """OpenAI logprobs / top_logprobs through the gateway: one entry per generated token, the
    greedy token is the most probable of its alternatives, streamed equal to unary."""
    full = client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0, max_tokens=6,
                                          logprobs=True, top_logprobs=3)
    content = full.choices[0].logprobs.content
    assert len(content) == full.usage.completion_tokens
    for entry in content:
        assert entry.logprob <= 0.0
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob, abs=1e-6)
        assert [t.logprob for t in entry.top_logprobs] == sorted(
            (t.logprob for t in entry.top_logprobs), reverse=True)
    streamed = []
    for event in client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0,
                                                max_tokens=6, logprobs=True, top_logprobs=3,
                                                stream=True):
        for choice in event.choices:
            if choice.logprobs and choice.logprobs.content:
                streamed.extend(e.logprob for e in choice.logprobs.content)
    assert streamed == pytest.approx([e.logprob for e in content], abs=1e-6)


def test_chat_second_turn_is_served_from_the_prefix_cache(client):
    """A conversation's second turn re-sends the first turn and its answer: the gateway's usage
    reports the cached prompt tokens (prompt_tokens_details.cached_tokens), and the first turn
    asked again gets the answer it got when nothing was cached."""
    history = [{"role": "system", "content": "You answer in the words of the old books, and "
                "you keep every answer short and plain for the reader. " * 3}] + CHAT
    first = client.chat.completions.create(model=MODEL, messages=history, temperature=0,
                                           max_tokens=12)
    assert first.usage.prompt_tokens > 32
    turn2 = history + [{"role": "assistant", "content": first.choices[0].message.content},
                       {"role": "user", "content": "And what came after that?"}]
    second = client.chat.completions.create(model=MODEL, messages=turn2, temperature=0,
                                            max_tokens=12)
    cached = second.usage.prompt_tokens_details.cached_tokens
    # Everything up to the last full 16-token block of the first turn's prompt is reused.
    assert cached >= (first.usage.prompt_tokens // 16) * 16 - 16 > 0
    assert cached < second.usage.prompt_tokens
    again = client.chat.completions.create(model=MODEL, messages=history, temperature=0,
                                           max_tokens=12)
    # Whole blocks of the prompt (the last token is always computed).
    n = first.usage.prompt_tokens
    assert again.usage.prompt_tokens_details.cached_tokens == min(n // 16 * 16, n - 1)
    assert again.choices[0].message.content == first.choices[0].message.content


def test_chat_n_choices_through_gateway(client):
    """OpenAI n = 3: three choices, indexed 0..2; greedy ones agree, sampled ones are seeded
    (the same request twice gives the same three choices)."""
    greedy = client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0,
                                            max_tokens=8, n=3)
    assert sorted(c.index for c in greedy.choices) == [0, 1, 2]
    assert len({c.message.content for c in greedy.choices}) == 1
    assert all(c.finish_reason in ("length", "stop") for c in greedy.choices)
    sampled = [client.chat.completions.create(model=MODEL, messages=CHAT, temperature=1.0,
                                              max_tokens=8, n=3, seed=42) for _ in range(2)]
    contents = [[c.message.content for c in sorted(s.choices, key=lambda c: c.index)]
                for s in sampled]
    assert contents[0] == contents[1]
    assert len(set(contents[0])) > 1


def test_gateway_with_api_keys_and_trusted_loopback(tandemd, tmp_path):
    """server.api_keys with the gateway: SMG sends no metadata to its workers, so its address
    is a trusted peer; the gateway's own clients authenticate to the gateway (--api-key)."""
    worker_key, gateway_key = "worker-key-0123", "gateway-key-4567"
    daemon = tandemd("--server.trusted_peers=127.0.0.1,::1", api_key=worker_key)
    with gateway(daemon, tmp_path, "--api-key", gateway_key) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=gateway_key, max_retries=0,
                               timeout=60)
        reply = client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0,
                                               max_tokens=8)
        assert reply.choices[0].message.content
        anonymous = openai.OpenAI(base_url=f"{base}/v1", api_key="wrong-key", max_retries=0,
                                  timeout=60)
        with pytest.raises(openai.AuthenticationError):
            anonymous.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=8)
    assert re.search(r"API keys required except from 127\.0\.0\.1, ::1", daemon.log())
