# Integration tests of tandemd's gRPC API through the smg-grpc-proto client stubs: the vLLM worker
# protocol, grpc health and reflection, API keys, the tandem.v1 service and Prometheus metrics.
import json
import math
import re
import struct
import subprocess
import threading
import time

import grpc
import pytest
from conftest import (DEMO_GGUF, DEMO_HF, TANDEM_CLI, TINY_DIR, TINY_F32, detokenize, generate,
                      generate_samples,
                      new_id, tandem_cli_json)
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from smg_grpc_proto import vllm_engine_pb2 as pb
from smg_grpc_proto.generated import common_pb2

REF_F32 = json.loads((TINY_DIR / "ref-f32.json").read_text())
DEMO_PROMPT = [1, 2, 3]
LONG = dict(max_tokens=480, ignore_eos=True)  # 0.07-1.5 s of decoding on the demo model


def rpc_code(fn, *args, **kwargs):
    """Runs a call that must fail; returns its status code."""
    with pytest.raises(grpc.RpcError) as e:
        r = fn(*args, **kwargs)
        if hasattr(r, "__next__"):  # a server stream: read it to its status
            list(r)
    return e.value.code()


def start_stream(daemon, request_id, input_ids=DEMO_PROMPT, **sampling):
    """Starts a streaming Generate; returns (call, the first response)."""
    sampling.setdefault("temperature", 0.0)
    req = pb.GenerateRequest(request_id=request_id, stream=True,
                             tokenized=pb.TokenizedInput(input_ids=input_ids),
                             sampling_params=pb.SamplingParams(**sampling))
    call = daemon.vllm.Generate(req, timeout=60, metadata=daemon.metadata())
    first = next(call)
    return call, first


def drain(call):
    chunks, completes = [], []
    for resp in call:
        kind = resp.WhichOneof("response")
        (chunks if kind == "chunk" else completes).append(getattr(resp, kind))
    return chunks, completes


# --- vllm.grpc.engine.VllmEngine ---------------------------------------------------------------


def test_health_check(demo):
    resp = demo.vllm.HealthCheck(pb.HealthCheckRequest(), timeout=5)
    assert resp.healthy


def test_model_info_matches_demo_config(demo):
    info = demo.vllm.GetModelInfo(pb.GetModelInfoRequest(), timeout=5)
    config = json.loads((DEMO_HF / "config.json").read_text())
    generation = json.loads((DEMO_HF / "generation_config.json").read_text())
    assert info.served_model_name == "tandem-demo"
    assert info.is_generation
    assert info.max_context_length == config["max_position_embeddings"]
    assert info.vocab_size == config["vocab_size"]
    assert info.model_type == config["model_type"]
    assert list(info.architectures) == config["architectures"]
    assert info.bos_token_id == config["bos_token_id"]
    assert info.pad_token_id == config["pad_token_id"]
    assert config["eos_token_id"] in info.eos_token_ids
    assert set(info.eos_token_ids) <= set(generation["eos_token_id"])
    assert 0 < info.max_req_input_len < info.max_context_length
    assert (DEMO_HF / "tokenizer.json").samefile(f"{info.tokenizer_path}/tokenizer.json")


def test_server_info(demo):
    info = demo.server_info()
    assert info.active_requests == 0
    assert not info.is_paused
    assert info.uptime_seconds > 0
    assert info.data_parallel_size == 1


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
@pytest.mark.parametrize("prompt", REF_F32["prompts"], ids=lambda p: p["name"])
def test_tiny_greedy_equals_llama_cpp(tiny, prompt, stream):
    want = prompt["greedy_tokens"]
    chunks, done = generate(tiny, prompt["tokens"], stream=stream, max_tokens=len(want),
                            ignore_eos=True)
    assert list(done.output_ids) == want
    assert done.finish_reason == "length"
    assert done.prompt_tokens == prompt["n_tokens"]
    assert done.completion_tokens == len(want)
    if stream:
        streamed = [t for c in chunks for t in c.token_ids]
        assert streamed == want
        assert all(len(c.token_ids) > 0 for c in chunks)
        assert chunks[-1].completion_tokens == len(want)
    else:
        assert chunks == []


@pytest.mark.parametrize("prompt", REF_F32["prompts"], ids=lambda p: p["name"])
def test_tiny_greedy_equals_tandem_generate(tiny, prompt):
    n = 24
    cli = tandem_cli_json("--model", str(TINY_F32), "--prompt-ids",
                          " ".join(map(str, prompt["tokens"])), "--max-tokens", str(n),
                          "--ignore-eos")
    _, done = generate(tiny, prompt["tokens"], max_tokens=n, ignore_eos=True)
    assert list(done.output_ids) == cli["token_ids"]
    assert list(done.output_ids[:16]) == prompt["greedy_tokens"]


def _demo_full(n=40):
    return tandem_cli_json("--model", str(DEMO_GGUF), "--prompt-ids",
                           " ".join(map(str, DEMO_PROMPT)), "--max-tokens", str(n),
                           "--ignore-eos")


def test_demo_greedy_equals_tandem_generate(demo):
    cli = _demo_full()
    _, done = generate(demo, DEMO_PROMPT, max_tokens=40, ignore_eos=True)
    assert list(done.output_ids) == cli["token_ids"]


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_stop_string_cuts_output(demo, stream):
    full = _demo_full()
    # A word of the greedy text that starts after its first 10 characters.
    words = [m for m in re.finditer(r"[A-Za-z]{4,}", full["text"]) if m.start() >= 10]
    assert words, f"no usable stop word in {full['text']!r}"
    stop = words[0].group(0)
    chunks, done = generate(demo, DEMO_PROMPT, stream=stream, max_tokens=40, ignore_eos=True,
                            stop=[stop])
    assert done.finish_reason == "stop"
    assert done.WhichOneof("matched_stop") == "matched_stop_str"
    assert done.matched_stop_str == stop
    ids = list(done.output_ids)
    if stream:
        assert [t for c in chunks for t in c.token_ids] == ids
    # Cut exactly at the first token whose text completes the stop string.
    assert ids == full["token_ids"][:len(ids)]
    assert stop in detokenize(DEMO_GGUF, ids).rstrip("\n")
    assert stop not in detokenize(DEMO_GGUF, ids[:-1]).rstrip("\n")
    assert len(ids) < len(full["token_ids"])


def test_max_tokens(demo):
    _, done = generate(demo, DEMO_PROMPT, max_tokens=5, ignore_eos=True)
    assert len(done.output_ids) == 5
    assert done.completion_tokens == 5
    assert done.finish_reason == "length"


def test_stop_token_ids(demo):
    full = _demo_full()["token_ids"]
    k = 6
    tok = full[k]
    first = full.index(tok)
    _, done = generate(demo, DEMO_PROMPT, max_tokens=40, ignore_eos=True, stop_token_ids=[tok])
    assert done.finish_reason == "stop"
    assert done.WhichOneof("matched_stop") == "matched_token_id"
    assert done.matched_token_id == tok
    # The ids before the stop token are the greedy ones; the stop token itself may be kept.
    ids = list(done.output_ids)
    assert ids in (full[:first], full[:first + 1])


def test_eos_stops_without_ignore_eos(demo):
    _, done = generate(demo, DEMO_PROMPT, max_tokens=40)
    info = demo.vllm.GetModelInfo(pb.GetModelInfoRequest(), timeout=5)
    assert done.finish_reason == "stop"
    assert done.matched_token_id in info.eos_token_ids
    assert len(done.output_ids) < 40


def test_abort_mid_stream(demo):
    rid = new_id("abort")
    call, first = start_stream(demo, rid, **LONG)
    assert first.WhichOneof("response") == "chunk"
    demo.vllm.Abort(pb.AbortRequest(request_ids=[rid, "never-seen"]), timeout=5)
    chunks, completes = drain(call)
    assert len(completes) == 1
    assert completes[0].finish_reason == "abort"
    got = len(first.chunk.token_ids) + sum(len(c.token_ids) for c in chunks)
    assert got < LONG["max_tokens"]
    assert demo.wait_idle() == 0
    # Aborting a finished id is fine.
    demo.vllm.Abort(pb.AbortRequest(request_ids=[rid]), timeout=5)
    # Both the Abort calls and the request's end are logged at info (one line each).
    log = demo.log()
    assert "abort: 2 request id(s) asked, 1 in flight cancelled" in log, log
    assert "abort: 1 request id(s) asked, 0 in flight cancelled" in log, log
    assert re.search(rf"request {rid}: abort, \d+ prompt \(\d+ cached\) \+ \d+ generated "
                     r"tokens", log), log


def test_one_log_line_per_request(demo):
    rid = new_id("logline")
    generate(demo, DEMO_PROMPT, request_id=rid, max_tokens=3, ignore_eos=True)
    bad = new_id("logbad")
    assert rpc_code(generate, demo, [], request_id=bad, max_tokens=1) == \
        grpc.StatusCode.INVALID_ARGUMENT
    hostile = "evil\nrequest forged: stop"
    generate(demo, DEMO_PROMPT, request_id=hostile, max_tokens=1, ignore_eos=True)
    log = demo.log()
    lines = [line for line in log.splitlines() if f"request {rid}:" in line]
    assert len(lines) == 1, log
    assert re.search(rf"request {rid}: length, {len(DEMO_PROMPT)} prompt \(\d+ cached\) \+ 3 "
                     r"generated tokens, "
                     r"\d+\.\d{3} s$", lines[0]), lines[0]
    assert re.search(rf"request {bad}: invalid_argument, .*; INVALID_ARGUMENT: ", log), log
    # A client's control characters never start a line of their own.
    assert "request evil?request forged: stop: length" in log, log
    assert not any(line.startswith("request forged") for line in log.splitlines()), log


def test_client_cancel_frees_request(demo):
    call, first = start_stream(demo, new_id("cancel"), **LONG)
    assert demo.server_info().active_requests == 1
    call.cancel()
    assert demo.wait_idle(timeout=5) == 0
    _, done = generate(demo, DEMO_PROMPT, max_tokens=3, ignore_eos=True)
    assert len(done.output_ids) == 3


def test_duplicate_in_flight_id(demo):
    rid = new_id("dup")
    call, _ = start_stream(demo, rid, **LONG)
    code = rpc_code(generate, demo, DEMO_PROMPT, request_id=rid, max_tokens=3)
    assert code == grpc.StatusCode.ALREADY_EXISTS
    demo.vllm.Abort(pb.AbortRequest(request_ids=[rid]), timeout=5)
    _, completes = drain(call)
    assert completes[0].finish_reason == "abort"
    # Once finished, the id can be used again.
    _, done = generate(demo, DEMO_PROMPT, request_id=rid, max_tokens=3, ignore_eos=True)
    assert len(done.output_ids) == 3


BAD_REQUESTS = {
    "top_p_2": (DEMO_PROMPT, dict(top_p=2.0)),
    "logprobs_over_20": (DEMO_PROMPT, dict(logprobs=21)),
    "logprobs_all": (DEMO_PROMPT, dict(logprobs=-1)),
    "prompt_logprobs_over_20": (DEMO_PROMPT, dict(prompt_logprobs=21)),
    "n_over_max_running": (DEMO_PROMPT, dict(n=100000)),
    "prompt_over_context": ([5] * 600, dict(max_tokens=1)),
    "prompt_plus_max_tokens_over_context": ([5] * 500, dict(max_tokens=100)),
    "unknown_token_id": ([1, 4096 + 7, 3], dict(max_tokens=1)),
    "empty_prompt": ([], dict(max_tokens=1)),
    "negative_temperature": (DEMO_PROMPT, dict(temperature=-1.0)),
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_bad_request_invalid_argument(demo, name, stream):
    ids, sampling = BAD_REQUESTS[name]
    code = rpc_code(generate, demo, ids, stream=stream, **sampling)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    # The daemon keeps serving.
    assert demo.vllm.HealthCheck(pb.HealthCheckRequest(), timeout=5).healthy
    _, done = generate(demo, DEMO_PROMPT, max_tokens=2, ignore_eos=True)
    assert len(done.output_ids) == 2


def test_embed_and_get_tokenizer_unimplemented(demo):
    code = rpc_code(demo.vllm.Embed,
                    pb.EmbedRequest(request_id="e", tokenized=pb.TokenizedInput(input_ids=[1])),
                    timeout=5)
    assert code == grpc.StatusCode.UNIMPLEMENTED
    code = rpc_code(demo.vllm.GetTokenizer, common_pb2.GetTokenizerRequest(), timeout=5)
    assert code == grpc.StatusCode.UNIMPLEMENTED


def raw_call(daemon, method, body, metadata=None):
    """A unary call with hand-made request bytes; returns the RpcError it must end with."""
    call = daemon.channel.unary_unary(method)  # bytes in, bytes out
    with pytest.raises(grpc.RpcError) as e:
        call(body, timeout=5, metadata=metadata)
    return e.value


def test_unparsable_requests_invalid_argument(demo):
    body = pb.GenerateRequest(request_id="id-QQ", tokenized=pb.TokenizedInput(input_ids=[1, 2]),
                              sampling_params=pb.SamplingParams(max_tokens=2)).SerializeToString()
    bad_utf8 = body.replace(b"QQ", b"\xc3\x28")
    e = raw_call(demo, "/vllm.grpc.engine.VllmEngine/Generate", bad_utf8)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "field 'request_id' is not valid UTF-8" in e.details()
    for method in ("GetLoads", "Abort", "HealthCheck"):
        e = raw_call(demo, f"/vllm.grpc.engine.VllmEngine/{method}", b"\x0a\x64xy")
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, method
        assert "malformed protobuf at byte 0" in e.details(), method
    assert demo.vllm.HealthCheck(pb.HealthCheckRequest(), timeout=5).healthy


def test_get_loads(demo):
    resp = demo.vllm.GetLoads(pb.GetLoadsRequest(include=["core"]), timeout=5)
    assert resp.dp_rank_count == 1
    assert len(resp.loads) == 1
    assert resp.loads[0].num_running_reqs == 0


# --- grpc.health.v1 and reflection --------------------------------------------------------------


def test_grpc_health_check_and_watch(demo):
    resp = demo.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert resp.status == health_pb2.HealthCheckResponse.SERVING
    watch = demo.health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=5)
    first = next(watch)
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()
    code = rpc_code(demo.health.Check, health_pb2.HealthCheckRequest(service="no.such.Service"),
                    timeout=5)
    assert code == grpc.StatusCode.NOT_FOUND


def test_reflection_lists_services(demo):
    stub = reflection_pb2_grpc.ServerReflectionStub(demo.channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
    names = {s.name for r in responses for s in r.list_services_response.service}
    assert "vllm.grpc.engine.VllmEngine" in names
    assert "tandem.v1.Tandem" in names
    assert "grpc.health.v1.Health" in names


# --- API keys ------------------------------------------------------------------------------------


def test_api_keys(tandemd):
    key = "integration-key-1"
    d = tandemd(api_key=key)
    no_key = [("x-other", "1")]
    wrong = [("authorization", "Bearer wrong-key-123")]
    for md in (no_key, wrong):
        code = rpc_code(d.vllm.GetModelInfo, pb.GetModelInfoRequest(), timeout=5, metadata=md)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        code = rpc_code(generate, d, DEMO_PROMPT, max_tokens=2, metadata=md)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        # The methods Tandem does not implement check the key too (docs/api.md).
        code = rpc_code(d.vllm.Embed, pb.EmbedRequest(request_id="e"), timeout=5, metadata=md)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        code = rpc_code(d.vllm.GetTokenizer, common_pb2.GetTokenizerRequest(), timeout=5,
                        metadata=md)
        assert code == grpc.StatusCode.UNAUTHENTICATED
    code = rpc_code(d.vllm.Embed, pb.EmbedRequest(request_id="e"), timeout=5,
                    metadata=d.metadata())
    assert code == grpc.StatusCode.UNIMPLEMENTED
    # Health stays open for probes; the right key works.
    assert d.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status == \
        health_pb2.HealthCheckResponse.SERVING
    assert d.vllm.GetModelInfo(pb.GetModelInfoRequest(), timeout=5,
                               metadata=d.metadata()).served_model_name == "tandem-demo"
    _, done = generate(d, DEMO_PROMPT, max_tokens=2, ignore_eos=True)
    assert len(done.output_ids) == 2


# --- tandem.v1.Tandem ----------------------------------------------------------------------------


def test_tandem_get_placement(demo, tandem_pb):
    tpb, tpbg = tandem_pb
    stub = tpbg.TandemStub(demo.channel)
    p = stub.GetPlacement(tpb.GetPlacementRequest(), timeout=5)
    config = json.loads((DEMO_HF / "config.json").read_text())
    assert p.num_moe_layers == config["num_hidden_layers"]
    assert p.num_experts_per_layer == config["num_experts"]
    assert p.experts_per_token == config["num_experts_per_tok"]
    assert len(p.layers) == p.num_moe_layers
    assert p.num_gpu_experts == sum(len(layer.gpu_expert_ids) for layer in p.layers)
    assert p.cpu_expert_bytes > 0


def test_tandem_request_counters_bound_the_id(demo, tandem_pb):
    tpb, tpbg = tandem_pb
    stub = tpbg.TandemStub(demo.channel)
    with pytest.raises(grpc.RpcError) as e:
        stub.GetRequestMoeCounters(tpb.GetRequestMoeCountersRequest(request_id="x" * 20000),
                                   timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == "request_id: 20000 bytes; the limit is 256"


def test_tandem_activation_stats_grow_and_dump(demo, tandem_pb):
    tpb, tpbg = tandem_pb
    stub = tpbg.TandemStub(demo.channel)
    live = tpb.STATS_SCOPE_LIVE
    before = stub.GetActivationStats(tpb.GetActivationStatsRequest(scope=live), timeout=5)
    n = 8
    _, done = generate(demo, DEMO_PROMPT, max_tokens=n, ignore_eos=True)
    after = stub.GetActivationStats(tpb.GetActivationStatsRequest(scope=live), timeout=5)
    assert after.num_experts_per_layer == 16
    assert len(after.layers) == 4
    assert after.tokens > before.tokens
    for b, a in zip(before.layers, after.layers):
        assert all(y >= x for x, y in zip(b.counts, a.counts))
        # top-2 routing: every new token of every layer adds exactly 2 expert counts.
        assert sum(a.counts) - sum(b.counts) == 2 * (after.tokens - before.tokens)
    dumped = stub.DumpActivationStats(tpb.DumpActivationStatsRequest(path="dump.json", scope=live),
                                      timeout=10)
    path = demo.stats_dir / "dump.json"
    assert path.samefile(dumped.path)
    assert dumped.bytes_written == path.stat().st_size
    assert dumped.tokens >= after.tokens
    json.loads(path.read_text())


# --- Prometheus ----------------------------------------------------------------------------------


def _requests_total(text, outcome):
    m = re.search(r'^tandem_requests_total\{outcome="%s"\} (\S+)$' % outcome, text, re.M)
    return float(m.group(1)) if m else 0.0


def test_metrics_count_requests(demo):
    before = demo.metrics_text()
    generate(demo, DEMO_PROMPT, max_tokens=3, ignore_eos=True)
    generate(demo, DEMO_PROMPT, max_tokens=3, ignore_eos=True, stream=True)
    rpc_code(generate, demo, DEMO_PROMPT, top_p=2.0)
    after = demo.metrics_text()
    assert _requests_total(after, "length") - _requests_total(before, "length") == 2
    assert (_requests_total(after, "invalid_argument")
            - _requests_total(before, "invalid_argument")) == 1


def test_concurrent_streams_are_independent(demo):
    """Four greedy streams at once give the same ids as one alone (batching is invisible)."""
    _, alone = generate(demo, DEMO_PROMPT, max_tokens=32, ignore_eos=True)
    results = [None] * 4

    def run(i):
        results[i] = generate(demo, DEMO_PROMPT, max_tokens=32, ignore_eos=True, stream=True)[1]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r is not None and list(r.output_ids) == list(alone.output_ids) for r in results)


def test_text_input_equals_tandem_generate(demo):
    cli = tandem_cli_json("--model", str(DEMO_GGUF), "--prompt", "In the beginning",
                          "--max-tokens", "24", "--ignore-eos")
    req = pb.GenerateRequest(request_id=new_id("text"), text="In the beginning",
                             sampling_params=pb.SamplingParams(temperature=0.0, max_tokens=24,
                                                               ignore_eos=True))
    completes = [r.complete for r in demo.vllm.Generate(req, timeout=30)]
    assert list(completes[-1].output_ids) == cli["token_ids"]


def test_empty_request_id_invalid_argument(demo):
    # generate() would replace an empty id, so send the raw request.
    req = pb.GenerateRequest(request_id="", tokenized=pb.TokenizedInput(input_ids=DEMO_PROMPT),
                             sampling_params=pb.SamplingParams(max_tokens=2))
    code = rpc_code(lambda: list(demo.vllm.Generate(req, timeout=10)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_deadline_exceeded_frees_request(demo):
    req = pb.GenerateRequest(request_id=new_id("deadline"), stream=True,
                             tokenized=pb.TokenizedInput(input_ids=DEMO_PROMPT),
                             sampling_params=pb.SamplingParams(temperature=0.0, **LONG))
    # LONG takes ~0.07 s on an AVX-512 machine (0.2 s was not always exceeded there).
    code = rpc_code(lambda: list(demo.vllm.Generate(req, timeout=0.03)))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert demo.wait_idle(timeout=5) == 0


def test_seeded_sampling_is_reproducible(demo):
    sampling = dict(temperature=1.0, top_k=50, seed=1234, max_tokens=24, ignore_eos=True)
    _, a = generate(demo, DEMO_PROMPT, **sampling)
    _, b = generate(demo, DEMO_PROMPT, stream=True, **sampling)
    assert list(a.output_ids) == list(b.output_ids)
    cli = tandem_cli_json("--model", str(DEMO_GGUF), "--prompt-ids",
                          " ".join(map(str, DEMO_PROMPT)), "--max-tokens", "24", "--ignore-eos",
                          "--temperature", "1", "--top-k", "50", "--seed", "1234")
    assert list(a.output_ids) == cli["token_ids"]


def test_get_loads_counts_running_request(demo):
    # LONG decodes in well under a second on the demo model now: on a loaded machine the request
    # can end before GetLoads is served, so a few attempts are allowed; one must see it.
    seen = None
    for attempt in range(5):
        rid = new_id(f"loads{attempt}")
        call, _ = start_stream(demo, rid, **LONG)
        loads = demo.vllm.GetLoads(pb.GetLoadsRequest(include=["core"]), timeout=5).loads[0]
        demo.vllm.Abort(pb.AbortRequest(request_ids=[rid]), timeout=5)
        drain(call)
        if loads.num_running_reqs + loads.num_waiting_reqs == 1:
            seen = loads
            break
        assert demo.wait_idle(timeout=5) == 0
    assert seen is not None, "GetLoads never counted the running request in 5 attempts"
    assert seen.num_total_reqs == 1


def test_prefix_cache_serves_a_second_turn(tiny):
    """A second turn that starts with the first turn's prompt and answer reuses their KV:
    cached_tokens in every chunk and the complete, the Prometheus hit counters, and the tokens
    tandem generate computes from scratch."""
    prompt = list(reversed(REF_F32["prompts"][2]["tokens"]))  # 64 tokens no other test sends
    before = tiny.metrics_text()
    _, first = generate(tiny, prompt, max_tokens=8, ignore_eos=True)
    assert first.cached_tokens == 0
    turn2 = prompt + list(first.output_ids) + REF_F32["prompts"][0]["tokens"][:5]
    chunks, done = generate(tiny, turn2, stream=True, max_tokens=8, ignore_eos=True)
    # KV of the 64 prompt tokens and 7 fed outputs: 4 full blocks of 16.
    assert done.cached_tokens == 64
    assert chunks and all(c.cached_tokens == 64 for c in chunks)
    cli = tandem_cli_json("--model", str(TINY_F32), "--prompt-ids", " ".join(map(str, turn2)),
                          "--max-tokens", "8", "--ignore-eos")
    assert list(done.output_ids) == cli["token_ids"]

    def counter(text, name):
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    def grown(name):
        return counter(after, name) - counter(before, name)

    deadline = time.monotonic() + 10  # the counters are exported about once a second
    while True:
        after = tiny.metrics_text()
        if grown("tandem_prefix_cache_queries_total") >= len(prompt) + len(turn2) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert grown("tandem_prefix_cache_queries_total") == len(prompt) + len(turn2)
    assert grown("tandem_prefix_cache_hits_total") == 64
    # GetLoads: the hit rate over every prompt so far, nothing left waiting.
    load = tiny.vllm.GetLoads(pb.GetLoadsRequest(include=["core"]), timeout=5,
                              metadata=tiny.metadata()).loads[0]
    assert 0.0 < load.cache_hit_rate < 1.0
    assert load.num_waiting_uncached_tokens == 0


def test_flush_cache_drops_what_the_prefix_cache_held(tiny):
    prompt = list(reversed(REF_F32["prompts"][1]["tokens"])) * 2  # 46 tokens no other test sends
    generate(tiny, prompt, max_tokens=2, ignore_eos=True)
    _, again = generate(tiny, prompt, max_tokens=2, ignore_eos=True)
    assert again.cached_tokens == 32
    flushed = tiny.vllm.FlushCache(common_pb2.FlushCacheRequest(), timeout=30,
                                   metadata=tiny.metadata())
    assert flushed.success, flushed.message
    assert re.match(r"dropped [1-9]\d* cached KV blocks; 0 held", flushed.message), flushed.message
    _, after = generate(tiny, prompt, max_tokens=2, ignore_eos=True)
    assert after.cached_tokens == 0
    assert list(after.output_ids) == list(again.output_ids)


def test_kv_events_stream_what_the_prefix_cache_stores_and_clears(tiny):
    """SubscribeKvEvents: a request's full blocks arrive as `stored` events (16 token ids each,
    chained by parent hash), FlushCache as `cleared`; resuming after a batch replays the rest."""
    call = tiny.vllm.SubscribeKvEvents(common_pb2.SubscribeKvEventsRequest(), timeout=60,
                                       metadata=tiny.metadata())
    batches = []

    def read():
        try:
            for b in call:
                batches.append(b)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.CANCELLED, e

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.3)  # subscribed before the request
    prompt = [int(t) for t in reversed(REF_F32["prompts"][0]["tokens"])] * 3  # 60 tokens
    generate(tiny, prompt, max_tokens=1, ignore_eos=True)

    def events(kind):
        return [e for b in batches for e in b.events if e.WhichOneof("data") == kind]

    deadline = time.monotonic() + 10
    while len(events("stored")) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    stored = [e.stored for e in events("stored")]
    assert len(stored) == 3, batches  # 60 prompt tokens: 3 full blocks
    for i, s in enumerate(stored):
        assert list(s.blocks[0].token_ids) == prompt[16 * i:16 * (i + 1)]
        assert s.blocks[0].block_size == 16
        if i == 0:
            assert not s.HasField("parent_block_hash")
        else:
            assert s.parent_block_hash == stored[i - 1].blocks[0].block_hash
    assert [b.sequence_number for b in batches] == sorted({b.sequence_number for b in batches})
    first = batches[0].sequence_number
    flushed = tiny.vllm.FlushCache(common_pb2.FlushCacheRequest(), timeout=30,
                                   metadata=tiny.metadata())
    assert flushed.success
    deadline = time.monotonic() + 10
    while not events("cleared") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert events("cleared"), batches
    call.cancel()
    reader.join(timeout=10)
    # Resuming after the first batch replays the later ones, numbered as before.
    resumed = tiny.vllm.SubscribeKvEvents(
        common_pb2.SubscribeKvEventsRequest(start_sequence_number=first), timeout=60,
        metadata=tiny.metadata())
    replay = next(iter(resumed))
    assert replay.sequence_number == first + 1
    resumed.cancel()


def test_kv_events_stream_ends_when_the_daemon_drains(tandemd):
    daemon = tandemd(f"--model.path={TINY_F32}")
    call = daemon.vllm.SubscribeKvEvents(common_pb2.SubscribeKvEventsRequest(), timeout=60,
                                         metadata=daemon.metadata())
    time.sleep(0.3)
    started = time.monotonic()
    daemon.signal()
    assert list(call) == []  # ends OK, not cancelled by a shutdown deadline
    assert call.code() == grpc.StatusCode.OK
    assert daemon.wait_exit() == 0
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_n_samples_each_equal_the_seed_plus_index_request(tiny, stream):
    """n = 3 seeded samples: one complete per index, sample i equal to the one-sample request
    with seed + i (each sample has its own seed stream over the shared prompt KV)."""
    prompt = REF_F32["prompts"][1]["tokens"]
    got = generate_samples(tiny, prompt, stream=stream, n=3, seed=5, temperature=1.0,
                           max_tokens=8, ignore_eos=True)
    assert sorted(got) == [0, 1, 2]
    for i, (streamed, done) in got.items():
        assert done.finish_reason == "length"
        assert done.completion_tokens == 8
        assert done.prompt_tokens == len(prompt)
        if stream:
            assert streamed == list(done.output_ids)
        _, alone = generate(tiny, prompt, seed=5 + i, temperature=1.0, max_tokens=8,
                            ignore_eos=True)
        assert list(done.output_ids) == list(alone.output_ids), f"sample {i}"
    assert got[0][1].output_ids != got[1][1].output_ids


def log_softmax(row):
    m = max(row)
    z = m + math.log(sum(math.exp(x - m) for x in row))
    return [x - z for x in row]


def tandem_logits_rows(ids, tmp_path):
    """`tandem logits` over `ids` as one batch: one row of vocabulary logits per position."""
    logits_file = tmp_path / "logits.f32"
    subprocess.run([str(TANDEM_CLI), "logits", "--model", str(DEMO_GGUF), "--prompt-ids",
                    " ".join(map(str, ids)), "--output", str(logits_file)], check=True,
                   capture_output=True, timeout=120)
    raw = logits_file.read_bytes()
    vocab = len(raw) // 4 // len(ids)
    return [struct.unpack_from(f"<{vocab}f", raw, 4 * vocab * r) for r in range(len(ids))]


def test_prompt_logprobs_are_log_softmax_of_tandem_logits(demo, tmp_path):
    """prompt_logprobs: every prompt token after the first, given the ones before it; sent once
    (the complete in unary, the first chunk in a stream)."""
    prompt = [1, 5, 9, 200, 31, 7, 64, 12]
    _, done = generate(demo, prompt, max_tokens=2, ignore_eos=True, prompt_logprobs=2)
    lp = done.input_logprobs
    assert list(lp.token_ids) == prompt
    assert not lp.token_logprobs[0].HasField("value") and not lp.top_logprobs[0].values
    rows = tandem_logits_rows(prompt, tmp_path)
    for i in range(1, len(prompt)):
        ref = log_softmax(rows[i - 1])
        assert lp.token_logprobs[i].value == pytest.approx(ref[prompt[i]], abs=2e-3)
        best = sorted(range(len(ref)), key=lambda t: (-ref[t], t))[:2]
        assert list(lp.top_logprobs[i].token_ids) == best
    chunks, streamed = generate(demo, prompt, stream=True, max_tokens=2, ignore_eos=True,
                                prompt_logprobs=2)
    assert chunks[0].input_logprobs == lp
    assert all(not c.HasField("input_logprobs") for c in chunks[1:])
    assert not streamed.HasField("input_logprobs")


def test_logprobs_are_log_softmax_of_tandem_logits(demo, tmp_path):
    """logprobs come from the raw logits: the same numbers as a log-softmax of `tandem logits`
    over the prompt and the generated tokens, the sampled token's and the top 3."""
    _, done = generate(demo, DEMO_PROMPT, max_tokens=5, ignore_eos=True, logprobs=3)
    out = list(done.output_ids)
    lp = done.output_logprobs
    assert list(lp.token_ids) == out and len(lp.token_logprobs) == 5 and len(lp.top_logprobs) == 5
    rows = tandem_logits_rows(DEMO_PROMPT + out[:-1], tmp_path)
    vocab = len(rows[0])
    for i, token in enumerate(out):
        ref = log_softmax(rows[len(DEMO_PROMPT) - 1 + i])
        assert lp.token_logprobs[i] == pytest.approx(ref[token], abs=2e-3)
        best = sorted(range(vocab), key=lambda t: (-ref[t], t))[:3]
        assert list(lp.top_logprobs[i].token_ids) == best
        assert list(lp.top_logprobs[i].values) == pytest.approx([ref[t] for t in best], abs=2e-3)
        assert token == best[0]  # greedy
    # Streaming: the chunks carry the same numbers, the complete none (it would double them).
    chunks, streamed = generate(demo, DEMO_PROMPT, stream=True, max_tokens=5, ignore_eos=True,
                                logprobs=3)
    values = [v for c in chunks for v in c.output_logprobs.token_logprobs]
    assert values == list(lp.token_logprobs)
    assert not streamed.output_logprobs.token_logprobs
    # Without logprobs asked for, none are sent.
    _, plain = generate(demo, DEMO_PROMPT, max_tokens=2, ignore_eos=True)
    assert not plain.HasField("output_logprobs") or not plain.output_logprobs.token_logprobs
