# Pytest fixtures of the integration tests: start the real tandemd on free ports, wait for
# grpc.health.v1 SERVING, keep its log, and on teardown check it is alive, SIGTERM it, expect 0.
#
# Environment (set by tests/integration/CMakeLists.txt): TANDEMD, TANDEM_CLI (binaries),
# TANDEM_SHARED_DIR (reference data). Defaults point at build/ and ../shared for manual runs.
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from smg_grpc_proto import vllm_engine_pb2 as pb
from smg_grpc_proto import vllm_engine_pb2_grpc as pbg

REPO = Path(__file__).resolve().parents[2]
TANDEMD = Path(os.environ.get("TANDEMD", REPO / "build/server/tandemd"))
TANDEM_CLI = Path(os.environ.get("TANDEM_CLI", REPO / "build/cli/tandem"))
SHARED = Path(os.environ.get("TANDEM_SHARED_DIR", REPO.parent / "shared"))
TINY_DIR = SHARED / "data/tiny-moe"
TINY_F32 = TINY_DIR / "tiny-moe-f32.gguf"
DEMO_GGUF = REPO / "models/demo/demo-moe-q8_0.gguf"
DEMO_HF = REPO / "models/demo/hf"

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60


def free_port():
    """A TCP port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_id(prefix="it"):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Daemon:
    """One tandemd process on its own gRPC and metrics ports, with its log in `log_path`."""

    def __init__(self, flags, log_path, api_key=None, env=None):
        self.port = free_port()
        self.metrics_port = free_port()
        while self.metrics_port == self.port:
            self.metrics_port = free_port()
        self.log_path = Path(log_path)
        self.api_key = api_key
        self.argv = [str(TANDEMD), f"--server.port={self.port}",
                     f"--metrics.port={self.metrics_port}", *flags]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=REPO, env=None if env is None else {**os.environ, **env})
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.vllm = pbg.VllmEngineStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.stopped = False

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def log(self):
        return self.log_path.read_text(errors="replace")

    def metadata(self):
        return [("authorization", f"Bearer {self.api_key}")] if self.api_key else None

    def wait_serving(self, timeout=START_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"tandemd exited with {self.proc.returncode} while starting:\n"
                            f"{self.log()}")
            try:
                resp = self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = resp.status
            except grpc.RpcError as e:
                last = e.code()
            time.sleep(0.05)
        pytest.fail(f"tandemd not SERVING after {timeout}s (last: {last}):\n{self.log()}")

    def server_info(self):
        return self.vllm.GetServerInfo(pb.GetServerInfoRequest(), timeout=5,
                                       metadata=self.metadata())

    def wait_idle(self, timeout=5.0):
        """Polls GetServerInfo until active_requests is 0; returns the last value seen."""
        deadline = time.monotonic() + timeout
        active = None
        while time.monotonic() < deadline:
            active = self.server_info().active_requests
            if active == 0:
                return 0
            time.sleep(0.05)
        return active

    def metrics_text(self):
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=5) as r:
            return r.read().decode()

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=STOP_TIMEOUT_S):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"tandemd did not exit within {timeout}s:\n{self.log()}")
        finally:
            self.stopped = True
            self.channel.close()
            self._log.close()
        return rc

    def stop_and_check(self):
        """Teardown: the daemon must still be alive; SIGTERM must end it with code 0."""
        if self.stopped:
            return
        if self.proc.poll() is not None:
            self.stopped = True
            self._log.close()
            pytest.fail(f"tandemd died during the test (code {self.proc.returncode}):\n"
                        f"{self.log()}")
        self.signal(signal.SIGTERM)
        rc = self.wait_exit()
        assert rc == 0, f"tandemd exited with {rc} after SIGTERM:\n{self.log()}"


class DaemonFactory:
    def __init__(self, tmp_dir):
        self.tmp_dir = Path(tmp_dir)
        self.daemons = []

    def start(self, *flags, api_key=None, wait=True, env=None):
        log = self.tmp_dir / f"tandemd-{len(self.daemons)}.log"
        all_flags = list(flags)
        if api_key:
            all_flags.append(f"--server.api_keys={api_key}")
        d = Daemon(all_flags, log, api_key=api_key, env=env)
        self.daemons.append(d)
        if wait:
            d.wait_serving()
        return d

    def close(self):
        errors = []
        for d in self.daemons:
            try:
                d.stop_and_check()
            except BaseException as e:  # collect every daemon's failure, then report
                errors.append(str(e))
        if errors:
            pytest.fail("\n\n".join(errors))


def _check_binaries():
    for b in (TANDEMD, TANDEM_CLI):
        if not b.is_file():
            pytest.fail(f"{b} is missing: build the tandemd and tandem targets first "
                        "(or set TANDEMD / TANDEM_CLI)")


@pytest.fixture
def tandemd(tmp_path):
    """Factory: tandemd(*flags, api_key=None, wait=True, env=None) starts a daemon (env: extra
    environment variables) that is checked on teardown."""
    _check_binaries()
    f = DaemonFactory(tmp_path)
    yield f.start
    f.close()


@pytest.fixture(scope="module")
def module_tandemd(tmp_path_factory):
    _check_binaries()
    f = DaemonFactory(tmp_path_factory.mktemp("tandemd"))
    yield f
    f.close()


@pytest.fixture(scope="module")
def demo(module_tandemd, tmp_path_factory):
    """The embedded demo model (no model.path), with a stats output directory for dumps."""
    stats_dir = tmp_path_factory.mktemp("stats")
    d = module_tandemd.start(f"--placement.stats_output_path={stats_dir / 'stats.json'}")
    d.stats_dir = stats_dir
    return d


@pytest.fixture(scope="module")
def tiny(module_tandemd):
    """The tiny random F32 model of the reference data (llama.cpp greedy references)."""
    return module_tandemd.start(f"--model.path={TINY_F32}")


@pytest.fixture(scope="session")
def tandem_pb(tmp_path_factory):
    """Python stubs of proto/tandem/v1/tandem.proto, generated now with grpc_tools."""
    from grpc_tools import protoc
    out = tmp_path_factory.mktemp("tandem_pb")
    rc = protoc.main(["protoc", f"-I{REPO / 'proto'}", f"--python_out={out}",
                      f"--grpc_python_out={out}", str(REPO / "proto/tandem/v1/tandem.proto")])
    assert rc == 0, "protoc failed on proto/tandem/v1/tandem.proto"
    sys.path.insert(0, str(out))
    from tandem.v1 import tandem_pb2, tandem_pb2_grpc
    return tandem_pb2, tandem_pb2_grpc


def generate(daemon, input_ids, *, request_id=None, stream=False, timeout=60, metadata=None,
             **sampling):
    """One Generate call; returns (chunks, complete). Greedy unless temperature is given."""
    sampling.setdefault("temperature", 0.0)
    req = pb.GenerateRequest(request_id=request_id or new_id(), stream=stream,
                             tokenized=pb.TokenizedInput(input_ids=list(input_ids)),
                             sampling_params=pb.SamplingParams(**sampling))
    chunks, completes = [], []
    for resp in daemon.vllm.Generate(req, timeout=timeout,
                                     metadata=metadata or daemon.metadata()):
        kind = resp.WhichOneof("response")
        (chunks if kind == "chunk" else completes).append(getattr(resp, kind))
    assert len(completes) == 1, f"expected one complete, got {len(completes)}"
    return chunks, completes[0]


def generate_samples(daemon, input_ids, *, stream, **sampling):
    """One Generate call with n samples; returns {index: (streamed ids, complete)}."""
    req = pb.GenerateRequest(request_id=new_id("n"), stream=stream,
                             tokenized=pb.TokenizedInput(input_ids=list(input_ids)),
                             sampling_params=pb.SamplingParams(**sampling))
    streamed, completes = {}, {}
    for resp in daemon.vllm.Generate(req, timeout=60, metadata=daemon.metadata()):
        if resp.WhichOneof("response") == "chunk":
            assert resp.chunk.index not in completes, "a chunk after its sample's complete"
            streamed.setdefault(resp.chunk.index, []).extend(resp.chunk.token_ids)
        else:
            assert resp.complete.index not in completes, "two completes for one sample"
            completes[resp.complete.index] = resp.complete
    return {i: (streamed.get(i, []), c) for i, c in completes.items()}


def tandem_cli_json(*args):
    """Runs `tandem generate ... --json` and returns the parsed JSON."""
    out = subprocess.run([str(TANDEM_CLI), "generate", *args, "--json"], capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(out.stdout)


def detokenize(model, ids):
    out = subprocess.run([str(TANDEM_CLI), "detokenize", "--model", str(model),
                          *[str(i) for i in ids]], capture_output=True, timeout=60, check=True)
    return out.stdout.decode("utf-8", errors="replace")
