# gpt-oss chat through the real SMG gateway: the gateway renders the harmony format with
# openai-harmony (o200k_harmony token ids), tandemd runs a gpt-oss GGUF with that vocabulary, and
# the gateway parses the harmony channels of what it generates.
#
# The model is scripts/fixtures/make_harmony_gpt_oss.py's: real o200k_harmony vocabulary, built so
# that its greedy answer after `<|start|>assistant` is `<|channel|>final<|message|>Hello<|return|>`.
# openai-harmony would download o200k_base.tiktoken; the test points it at the copy the PyPI
# package bpe-openai ships (TIKTOKEN_ENCODINGS_BASE, checked against OpenAI's SHA-256 by the
# script), so everything runs offline.
import gzip
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from conftest import REPO
from test_gateway_e2e import gateway

SERVED = "gpt-oss-harmony-tiny"
CHAT = [{"role": "user", "content": "Say hello."}]
GENERATOR = REPO / "scripts/fixtures/make_harmony_gpt_oss.py"


@pytest.fixture(scope="module")
def harmony_files(tmp_path_factory):
    """(the GGUF, a folder holding o200k_base.tiktoken), made once per module."""
    out = tmp_path_factory.mktemp("harmony")
    import bpe_openai  # in the test venv (tests/integration/requirements.txt)

    packed = Path(bpe_openai.__file__).parent / "data" / "o200k_base.tiktoken.gz"
    encodings = out / "encodings"
    encodings.mkdir()
    (encodings / "o200k_base.tiktoken").write_bytes(gzip.decompress(packed.read_bytes()))
    model = out / "tiny-gpt-oss-harmony.gguf"
    subprocess.run([sys.executable, str(GENERATOR), str(model), "--tiktoken",
                    str(encodings / "o200k_base.tiktoken")], check=True, capture_output=True)
    return model, encodings


@pytest.fixture(scope="module")
def harmony_stack(module_tandemd, harmony_files, tmp_path_factory):
    model, encodings = harmony_files
    daemon = module_tandemd.start(f"--model.path={model}", f"--model.served_name={SERVED}")
    with gateway(daemon, tmp_path_factory.mktemp("smg"), model=SERVED,
                 env={"TIKTOKEN_ENCODINGS_BASE": str(encodings)}) as base:
        yield daemon, base


@pytest.fixture
def client(harmony_stack):
    _, base = harmony_stack
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)


def test_chat_answer_is_the_final_channel(client):
    """The gateway sent the harmony rendering's token ids, tandemd generated the channel header,
    the message and <|return|>, and the gateway returned only the final channel's text. Only the
    o200k_harmony id of "assistant" (173781) as the last prompt token starts the model's chain
    (every other token embeds to zero and would give token 0), so "Hello" also proves the prompt
    ended in `<|start|>assistant`."""
    reply = client.chat.completions.create(model=SERVED, messages=CHAT, temperature=0,
                                           max_tokens=16)
    choice = reply.choices[0]
    assert choice.message.content == "Hello"
    assert choice.finish_reason == "stop"
    # <|channel|> final <|message|> Hello <|return|>: the stop token is counted as generated.
    assert reply.usage.completion_tokens == 5
    # openai-harmony's system message plus the user turn: far more than the few words of CHAT.
    assert reply.usage.prompt_tokens > 20


def test_streamed_chat_equals_unary(client):
    parts, finish = [], None
    for event in client.chat.completions.create(model=SERVED, messages=CHAT, temperature=0,
                                                max_tokens=16, stream=True):
        for choice in event.choices:
            parts.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(parts) == "Hello"
    assert finish == "stop"

