#!/usr/bin/env python3
"""Soak test of tandemd: N streaming clients on loopback for a fixed time, a share of them
aborted mid-stream, the daemon's RSS and open file descriptors sampled; reports the growth after
warm-up as a least-squares slope, and fails on any error that is not an abort.

Usage (the integration-test venv has grpc and the protocol stubs; ./dev test makes it):
  build/test-venv/bin/python scripts/soak.py [--minutes 30] [--streams 32] [--abort-share 0.05]
      [--tandemd build/server/tandemd] [--out soak-out] [-- extra tandemd flags]

Bounded and local: tandemd listens on 127.0.0.1 only, on free ports, and is stopped (SIGTERM,
expecting exit 0) at the end. Writes <out>/samples.csv (seconds, rss_mb, fds, requests,
errors) and <out>/summary.json, and prints the summary.
"""
import argparse
import json
import os
import random
import sys
import threading
import time
import uuid
from pathlib import Path

import grpc
from local_tandemd import DEFAULT_TANDEMD, LocalTandemd
from smg_grpc_proto import vllm_engine_pb2 as pb


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def slope_per_hour(points):
    """Least-squares slope of (seconds, value) points, per hour; 0 for fewer than 2 points."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 3600.0


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.completed = 0
        self.aborted = 0
        self.errors = []

    def add(self, field, detail=None):
        with self.lock:
            if field == "errors":
                self.errors.append(detail)
            else:
                setattr(self, field, getattr(self, field) + 1)


def client(stub, stop, counters, abort_share, seed):
    rng = random.Random(seed)
    while not stop.is_set():
        rid = f"soak-{uuid.uuid4().hex[:12]}"
        prompt = [rng.randrange(1, 4000) for _ in range(rng.randrange(4, 64))]
        req = pb.GenerateRequest(
            request_id=rid, stream=True, tokenized=pb.TokenizedInput(input_ids=prompt),
            sampling_params=pb.SamplingParams(temperature=0.8, max_tokens=rng.randrange(8, 96),
                                              seed=rng.randrange(1 << 30), ignore_eos=True))
        abort_after = rng.randrange(1, 8) if rng.random() < abort_share else None
        counters.add("requests")
        call = stub.Generate(req, timeout=300)
        chunks = 0
        dropped = False
        try:
            for resp in call:
                if resp.WhichOneof("response") == "chunk":
                    chunks += 1
                    if abort_after is not None and chunks >= abort_after:
                        # Half the aborts through the Abort RPC, half by dropping the stream.
                        if rng.random() < 0.5:
                            stub.Abort(pb.AbortRequest(request_ids=[rid]), timeout=10)
                        else:
                            dropped = True
                            call.cancel()
                            break
                else:
                    counters.add("aborted" if resp.complete.finish_reason == "abort"
                                 else "completed")
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED and dropped:
                counters.add("aborted")
            else:
                counters.add("errors", f"{e.code().name}: {e.details()}")
        else:
            if dropped:
                counters.add("aborted")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--abort-share", type=float, default=0.05)
    ap.add_argument("--sample-seconds", type=float, default=5.0)
    ap.add_argument("--warmup-share", type=float, default=0.2,
                    help="share of the run before the slope is measured")
    ap.add_argument("--tandemd", default=str(DEFAULT_TANDEMD))
    ap.add_argument("--out", default="soak-out")
    ap.add_argument("flags", nargs="*", help="extra tandemd flags (after --)")
    a = ap.parse_args()
    if not 0 < a.minutes <= 24 * 60 or not 1 <= a.streams <= 1024:
        ap.error("--minutes must be in (0, 1440] and --streams in [1, 1024]")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    daemon = LocalTandemd([f"--server.max_running_requests={a.streams}", *a.flags],
                          out / "tandemd.log", tandemd=a.tandemd, start_timeout=120)
    stub = daemon.stub
    stop = threading.Event()
    counters = Counters()
    threads = [threading.Thread(target=client, args=(stub, stop, counters, a.abort_share, i),
                                daemon=True) for i in range(a.streams)]
    start = time.monotonic()
    for t in threads:
        t.start()
    samples = []
    with open(out / "samples.csv", "w") as csv:
        csv.write("seconds,rss_mb,fds,requests,errors\n")
        while time.monotonic() - start < a.minutes * 60:
            time.sleep(a.sample_seconds)
            if not daemon.alive():
                break
            t = time.monotonic() - start
            row = (t, rss_mb(daemon.proc.pid), open_fds(daemon.proc.pid), counters.requests,
                   len(counters.errors))
            samples.append(row)
            csv.write(",".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row) + "\n")
            csv.flush()
    stop.set()
    for t in threads:
        t.join(timeout=60)
    alive = daemon.alive()
    rc = daemon.stop() if alive else None

    warm = [s for s in samples if s[0] >= a.warmup_share * a.minutes * 60]
    summary = {
        "minutes": a.minutes, "streams": a.streams, "abort_share": a.abort_share,
        "requests": counters.requests, "completed": counters.completed,
        "aborted": counters.aborted, "errors": len(counters.errors),
        "first_errors": counters.errors[:5],
        "daemon_alive_at_end": alive, "exit_code": rc,
        "rss_mb_first": samples[0][1] if samples else None,
        "rss_mb_after_warmup": warm[0][1] if warm else None,
        "rss_mb_last": samples[-1][1] if samples else None,
        "rss_mb_max": max(s[1] for s in samples) if samples else None,
        "rss_slope_mb_per_hour_after_warmup": round(slope_per_hour([(s[0], s[1]) for s in warm]),
                                                    3),
        "fds_min": min(s[2] for s in samples) if samples else None,
        "fds_max": max(s[2] for s in samples) if samples else None,
        "fd_slope_per_hour_after_warmup": round(slope_per_hour([(s[0], s[2]) for s in warm]), 3),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    ok = alive and rc == 0 and not counters.errors
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
