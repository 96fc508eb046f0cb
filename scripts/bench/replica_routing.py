#!/usr/bin/env python3
"""Prefix-cache hit rate over two tandemd replicas behind one SMG gateway, by routing policy.

A scripted workload of --conversations chats, --turns turns each, interleaved round by round;
every turn re-sends the whole conversation (the history grows with each answer). For each policy
(round_robin, cache_aware by default) two fresh replicas and a gateway are started, the workload
runs, and the replicas' tandem_prefix_cache_{hits,queries}_total give the hit rate.

Usage (the integration-test venv has smg, openai and grpc):
  build/test-venv/bin/python scripts/bench/replica_routing.py [--model M] [--policies a,b]
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import openai  # noqa: E402
from local_tandemd import LocalTandemd, free_port  # noqa: E402
from smg_grpc_proto import vllm_engine_pb2 as pb  # noqa: E402

WORDS = ("the light and the darkness were divided and the waters under the heaven were "
         "gathered together unto one place and the dry land appeared").split()


def counter(text, name):
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def metrics(daemon):
    with urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return (counter(text, "tandem_prefix_cache_hits_total"),
            counter(text, "tandem_prefix_cache_queries_total"))


def start_gateway(daemons, policy, log_path):
    info = daemons[0].stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
    port = free_port()
    smg = str(Path(sys.executable).with_name("smg"))
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [smg, "launch", "--host", "127.0.0.1", "--port", str(port), "--worker-urls",
         *(f"grpc://127.0.0.1:{d.port}" for d in daemons), "--policy", policy,
         "--tokenizer-path", info.tokenizer_path, "--prometheus-host", "127.0.0.1",
         "--prometheus-port", str(free_port())],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/v1/models", timeout=2) as r:
                models = [m["id"] for m in json.loads(r.read())["data"]]
            if models:
                return proc, base, models[0]
        except OSError:
            pass
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    sys.exit(f"the gateway never listed a model; see {log_path}")


def run_policy(policy, a, out):
    flags = [f"--model.path={a.model}"] if a.model else []
    daemons = [LocalTandemd(flags + [f"--runtime.threads={a.threads}"],
                            out / f"tandemd-{policy}-{i}.log") for i in range(2)]
    gw, base, model = start_gateway(daemons, policy, out / f"smg-{policy}.log")
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=600)
    rng = random.Random(7)
    chats = [[{"role": "system", "content": " ".join(rng.choice(WORDS) for _ in range(a.system))},
              {"role": "user", "content": f"Conversation {c}: tell me of the {rng.choice(WORDS)}."}]
             for c in range(a.conversations)]
    try:
        for turn in range(a.turns):
            for chat in chats:
                reply = client.chat.completions.create(model=model, messages=chat, temperature=0,
                                                       max_tokens=a.answer)
                chat.append({"role": "assistant", "content": reply.choices[0].message.content})
                chat.append({"role": "user", "content": f"And then, in turn {turn + 1}?"})
        time.sleep(2.5)  # the counters are exported about once a second
        per_replica = [metrics(d) for d in daemons]
    finally:
        os.killpg(gw.pid, signal.SIGTERM)
        gw.wait(timeout=30)
        for d in daemons:
            d.stop()
    hits = sum(h for h, _ in per_replica)
    queries = sum(q for _, q in per_replica)
    return {"hit_rate": round(hits / queries, 3) if queries else 0.0, "hits": hits,
            "queries": queries, "queries_per_replica": [q for _, q in per_replica]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="", help="model file (default: the embedded demo model)")
    ap.add_argument("--policies", default="round_robin,cache_aware")
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--system", type=int, default=60, help="words in each system prompt")
    ap.add_argument("--answer", type=int, default=24, help="tokens per answer")
    ap.add_argument("--threads", type=int, default=1, help="threads per replica")
    ap.add_argument("--out", default="replica-routing")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {p: run_policy(p, a, out) for p in a.policies.split(",")}
    summary = {"model": a.model or "embedded demo", "conversations": a.conversations,
               "turns": a.turns, "threads_per_replica": a.threads, "policies": results}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
