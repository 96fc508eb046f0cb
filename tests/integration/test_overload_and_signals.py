# Integration tests of tandemd under overload and shutdown signals: fast RESOURCE_EXHAUSTED beyond
# the queue, SIGTERM draining (grace long and short), one SIGTERM delivered twice (GNU timeout), a
# SIGTERM while starting, and a second signal exiting at once.
import json
import os
import signal
import subprocess
import threading
import time

import grpc
from conftest import REPO, TANDEMD, free_port, generate
from grpc_health.v1 import health_pb2
from smg_grpc_proto import vllm_engine_pb2 as pb

PROMPT = [1] * 30
LONG = dict(max_tokens=480, ignore_eos=True)  # prompt + max_tokens fit the demo's 512 context
# These tests signal or overload the daemon while LONG streams are still running, so decoding
# must take seconds, not the fraction of one the demo model needs with the SIMD kernels: one
# thread of the scalar reference kernels (about 10x slower, and as slow on every machine).
SLOW = ("--runtime.cpu_kernels=scalar", "--runtime.threads=1")


class Stream:
    """A streaming Generate read on its own thread; records its events with a shared clock."""

    def __init__(self, daemon, request_id, **sampling):
        sampling.setdefault("temperature", 0.0)
        req = pb.GenerateRequest(request_id=request_id, stream=True,
                                 tokenized=pb.TokenizedInput(input_ids=PROMPT),
                                 sampling_params=pb.SamplingParams(**sampling))
        self.call = daemon.vllm.Generate(req, timeout=120)
        self.first = threading.Event()
        self.tokens = 0
        self.complete = None
        self.error = None
        self.thread = threading.Thread(target=self._read)
        self.thread.start()

    def _read(self):
        try:
            for resp in self.call:
                kind = resp.WhichOneof("response")
                if kind == "chunk":
                    self.tokens += len(resp.chunk.token_ids)
                    self.first.set()
                else:
                    self.complete = resp.complete
        except grpc.RpcError as e:
            self.error = e
        finally:
            self.first.set()

    def join(self, timeout=120):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "stream did not end"


def wait_not_serving(daemon, timeout=10):
    """Polls grpc.health.v1 until the daemon reports NOT_SERVING (the signal thread is async)."""
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = daemon.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
        if status == health_pb2.HealthCheckResponse.NOT_SERVING:
            return status
        time.sleep(0.01)
    return status


def test_overload_excess_gets_resource_exhausted(tandemd):
    # server.max_queued_requests counts the requests waiting beyond a full batch: 8 run, 4 wait.
    d = tandemd(*SLOW, "--server.max_running_requests=8", "--server.max_queued_requests=4")
    n = 16
    results = [None] * n
    start = threading.Barrier(n)

    def run(i):
        start.wait()
        try:
            _, done = generate(d, PROMPT, request_id=f"load-{i}", **LONG)
            results[i] = ("ok", time.monotonic(), done)
        except grpc.RpcError as e:
            results[i] = (e.code(), time.monotonic(), e.details())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    ok = [r for r in results if r[0] == "ok"]
    exhausted = [r for r in results if r[0] == grpc.StatusCode.RESOURCE_EXHAUSTED]
    assert len(ok) + len(exhausted) == n, [r[0] for r in results]
    assert exhausted, "no request was refused"
    # docs/api.md: the queue is full when max_running_requests + max_queued_requests requests are
    # in flight.
    assert len(ok) == 12, f"admitted {len(ok)}, refused {len(exhausted)}"
    for _, _, done in ok:
        assert done.finish_reason == "length"
        assert len(done.output_ids) == LONG["max_tokens"]
    # Refused at admission: every refusal came back before the first admitted request finished.
    assert max(r[1] for r in exhausted) < min(r[1] for r in ok)
    assert d.wait_idle() == 0
    _, done = generate(d, PROMPT, max_tokens=2, ignore_eos=True)
    assert len(done.output_ids) == 2


def test_sigterm_drains_streams(tandemd, tmp_path):
    stats = tmp_path / "out-stats.json"
    d = tandemd(*SLOW, f"--placement.stats_output_path={stats}")
    streams = [Stream(d, f"drain-{i}", **LONG) for i in range(4)]
    for s in streams:
        assert s.first.wait(30)
    watch = d.health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    d.signal(signal.SIGTERM)
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()
    # Draining: health NOT_SERVING, HealthCheck unhealthy, new requests refused.
    assert wait_not_serving(d) == health_pb2.HealthCheckResponse.NOT_SERVING
    assert not d.vllm.HealthCheck(pb.HealthCheckRequest(), timeout=5).healthy
    assert d.server_info().is_paused
    refused = None
    try:
        generate(d, PROMPT, max_tokens=2)
    except grpc.RpcError as e:
        refused = e.code()
    assert refused == grpc.StatusCode.UNAVAILABLE
    assert all(s.complete is None for s in streams), "a stream ended before the checks"
    for s in streams:
        s.join()
        assert s.error is None, s.error
        assert s.complete is not None
        assert s.complete.finish_reason == "length"
        assert s.tokens == LONG["max_tokens"]
    assert d.wait_exit() == 0, d.log()
    data = json.loads(stats.read_text())
    assert data["format"] == "tandem.activation_stats"
    assert data["tokens"] >= 4 * LONG["max_tokens"]


def test_sigterm_short_grace_aborts(tandemd):
    d = tandemd(*SLOW, "--server.shutdown_grace_seconds=1")
    streams = [Stream(d, f"grace-{i}", **LONG) for i in range(8)]
    for s in streams:
        assert s.first.wait(30)
    d.signal(signal.SIGTERM)
    for s in streams:
        s.join()
        assert s.error is None, s.error
        assert s.complete is not None
        assert s.complete.finish_reason in ("length", "abort")
    aborted = [s for s in streams if s.complete.finish_reason == "abort"]
    assert aborted, "every stream finished within the 1 s grace"
    for s in aborted:
        assert s.tokens < LONG["max_tokens"]
    assert d.wait_exit() == 0, d.log()


def test_repeated_sigterm_is_one_request(tandemd, tmp_path):
    """GNU timeout signals the child and then its process group: one stop, delivered twice."""
    stats = tmp_path / "out-stats.json"
    d = tandemd(*SLOW, f"--placement.stats_output_path={stats}")
    streams = [Stream(d, f"repeat-{i}", **LONG) for i in range(4)]
    for s in streams:
        assert s.first.wait(30)
    os.kill(d.proc.pid, signal.SIGTERM)
    os.kill(d.proc.pid, signal.SIGTERM)
    assert wait_not_serving(d) == health_pb2.HealthCheckResponse.NOT_SERVING
    for s in streams:
        s.join()
        assert s.error is None, s.error
        assert s.complete is not None and s.complete.finish_reason == "length"
        assert s.tokens == LONG["max_tokens"]
    assert d.wait_exit() == 0, d.log()
    assert "the same request" in d.log()
    data = json.loads(stats.read_text())
    assert data["tokens"] >= 4 * LONG["max_tokens"]


def test_sigterm_while_starting_exits_cleanly(tmp_path):
    """A SIGTERM before the model loads (here: while tandemd waits to read its configuration,
    a FIFO nobody writes yet) exits 0 instead of killing the process by the signal."""
    fifo = tmp_path / "tandem.yaml"
    os.mkfifo(fifo)
    log = tmp_path / "start.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(TANDEMD), "--config", str(fifo),
                                 f"--server.port={free_port()}", f"--metrics.port={free_port()}"],
                                stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        time.sleep(0.5)
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0, f"exit {rc} after a SIGTERM while starting:\n{log.read_text()}"
    assert "SIGTERM while starting" in log.read_text()
    # And once the configuration is read, while the model loads.
    for delay in (0.2,):
        proc = subprocess.Popen([str(TANDEMD), f"--server.port={free_port()}",
                                 f"--metrics.port={free_port()}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=REPO)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, f"SIGTERM {delay * 1000:.0f} ms after start"


def test_second_sigterm_exits_at_once(tandemd):
    d = tandemd(*SLOW)
    streams = [Stream(d, f"twice-{i}", **LONG) for i in range(16)]
    for s in streams:
        assert s.first.wait(30)
    d.signal(signal.SIGTERM)
    assert wait_not_serving(d) == health_pb2.HealthCheckResponse.NOT_SERVING
    # Past the window in which a repeated SIGTERM is the same request.
    time.sleep(1.2)
    assert d.proc.poll() is None, f"the drain ended within 1.2 s:\n{d.log()}"
    d.signal(signal.SIGTERM)
    assert d.wait_exit(timeout=10) == 1, d.log()
    for s in streams:
        s.join()
        # Cut off: no normal end of the stream.
        assert s.error is not None or s.complete is None or s.complete.finish_reason != "length"


def test_second_sigint_exits_at_once(tandemd):
    d = tandemd(*SLOW)
    streams = [Stream(d, f"int-{i}", **LONG) for i in range(4)]
    for s in streams:
        assert s.first.wait(30)
    d.signal(signal.SIGINT)
    assert wait_not_serving(d) == health_pb2.HealthCheckResponse.NOT_SERVING
    d.signal(signal.SIGINT)
    assert d.wait_exit(timeout=10) == 1, d.log()
    for s in streams:
        s.join()
