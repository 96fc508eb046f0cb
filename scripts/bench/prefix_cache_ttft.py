#!/usr/bin/env python3
"""Time to first token of a chat's second turn, with and without the prefix cache.

Turn 1 sends a history of --history token ids and generates --answer tokens; turn 2 sends the
history, the answer and --question new ids, and its time to first token (streamed) is measured.
Each mode runs on a fresh tandemd (runtime.prefix_caching true / false), --rounds conversations
each with a different history; medians are printed with the ratio and the machine.

Usage (the integration-test venv has grpc and the protocol stubs):
  build/test-venv/bin/python scripts/bench/prefix_cache_ttft.py --model bench-models/M.gguf \
      [--history 1000] [--threads 2] [--rounds 3] [-- extra tandemd flags]
"""
import argparse
import json
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from local_tandemd import REPO, LocalTandemd  # noqa: E402
from smg_grpc_proto import vllm_engine_pb2 as pb  # noqa: E402


def stream(stub, ids, max_tokens):
    """One streamed Generate; returns (seconds to the first chunk, output ids, cached tokens)."""
    req = pb.GenerateRequest(request_id=uuid.uuid4().hex, stream=True,
                             tokenized=pb.TokenizedInput(input_ids=ids),
                             sampling_params=pb.SamplingParams(temperature=0.0,
                                                               max_tokens=max_tokens,
                                                               ignore_eos=True))
    start = time.monotonic()
    first, out, cached = None, [], 0
    for resp in stub.Generate(req, timeout=3600):
        if resp.HasField("chunk"):
            if first is None:
                first = time.monotonic() - start
            out.extend(resp.chunk.token_ids)
        else:
            cached = resp.complete.cached_tokens
            out = list(resp.complete.output_ids) or out
    return first, out, cached


def conversation(stub, rng, vocab, a):
    history = [rng.randrange(100, vocab) for _ in range(a.history)]
    t1, answer, _ = stream(stub, history, a.answer)
    turn2 = history + answer + [rng.randrange(100, vocab) for _ in range(a.question)]
    t2, _, cached = stream(stub, turn2, a.answer)
    return {"turn1_ttft_s": t1, "turn2_ttft_s": t2, "turn2_prompt": len(turn2),
            "turn2_cached": cached}


def machine(a):
    """The CPU line and measured read bandwidth, as tandem bench prints them."""
    out = subprocess.run([str(REPO / "build/cli/tandem"), "bench", "--model", a.model,
                          "--prompt-tokens", "1", "--gen-tokens", "0", "--threads",
                          str(a.threads)], capture_output=True, text=True, check=False).stdout
    return next((line for line in out.splitlines() if line.startswith("cpu:")), "cpu: unknown")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--history", type=int, default=1000)
    ap.add_argument("--answer", type=int, default=16)
    ap.add_argument("--question", type=int, default=24)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="prefix-cache-ttft")
    ap.add_argument("flags", nargs="*", help="extra tandemd flags (after --)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for mode in ("false", "true"):
        daemon = LocalTandemd([f"--model.path={a.model}", f"--runtime.threads={a.threads}",
                               f"--runtime.prefix_caching={mode}", *a.flags],
                              out / f"tandemd-prefix-{mode}.log")
        vocab = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10).vocab_size
        rng = random.Random(1234)  # the same conversations in both modes
        runs = [conversation(daemon.stub, rng, vocab, a) for _ in range(a.rounds)]
        daemon.stop()
        results[mode] = runs
    off = statistics.median(r["turn2_ttft_s"] for r in results["false"])
    on = statistics.median(r["turn2_ttft_s"] for r in results["true"])
    summary = {
        "model": a.model, "history": a.history, "threads": a.threads, "rounds": a.rounds,
        "machine": machine(a),
        "turn2_ttft_s_without_cache": round(off, 3), "turn2_ttft_s_with_cache": round(on, 3),
        "speedup": round(off / on, 1),
        "turn2_cached_tokens": [r["turn2_cached"] for r in results["true"]],
        "runs": results,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
