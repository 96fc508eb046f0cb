"""A tandemd started on loopback for a script (soak, benchmarks): free ports, a log file, wait
until grpc.health says SERVING, stop with SIGTERM. Needs grpc and the protocol stubs (the
integration-test venv has them)."""
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from smg_grpc_proto import vllm_engine_pb2_grpc as pbg

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TANDEMD = REPO / "build/server/tandemd"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalTandemd:
    """tandemd with `flags` on 127.0.0.1; `stub` is a VllmEngine stub once start() returns."""

    def __init__(self, flags, log_path, tandemd=DEFAULT_TANDEMD, start_timeout=600):
        self.port, self.metrics_port = free_port(), free_port()
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(tandemd), "--server.host=127.0.0.1", f"--server.port={self.port}",
             "--metrics.host=127.0.0.1", f"--metrics.port={self.metrics_port}", *flags],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = pbg.VllmEngineStub(self.channel)
        self._wait_serving(start_timeout)

    def _wait_serving(self, timeout):
        health = health_pb2_grpc.HealthStub(self.channel)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"tandemd exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if health.Check(health_pb2.HealthCheckRequest(), timeout=2).status == 1:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                sys.exit(f"tandemd did not become SERVING within {timeout} s; see {self.log_path}")
            time.sleep(0.2)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=120):
        """SIGTERM and wait; the exit code (None if it had to be killed)."""
        rc = self.proc.poll()
        if rc is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                rc = None
        self.channel.close()
        self._log.close()
        return rc
