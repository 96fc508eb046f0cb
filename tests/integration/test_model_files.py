# Integration tests of what tandemd does with files other local users or the operator can touch:
# the served model file changing underneath it (issue 18 item 1) and the exported tokenizer
# directory (item 2).
import os
import shutil
import subprocess
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2
from smg_grpc_proto import vllm_engine_pb2 as pb

from conftest import DEMO_GGUF, generate

PROMPT = [1, 2, 3, 10, 20, 30]


def served_copy(tmp_path):
    path = tmp_path / "model.gguf"
    shutil.copyfile(DEMO_GGUF, path)
    return path


def greedy(daemon, n=8):
    _, done = generate(daemon, PROMPT, max_tokens=n, ignore_eos=True)
    return list(done.output_ids)


def health_status(daemon):
    return daemon.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status


def wait_not_serving(daemon, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health_status(daemon) == health_pb2.HealthCheckResponse.NOT_SERVING:
            return True
        time.sleep(0.1)
    return False


def assert_stopped_serving(daemon, what):
    """Requests fail with a message naming the change; health says NOT_SERVING; alive."""
    with pytest.raises(grpc.RpcError) as failed:
        greedy(daemon)
    assert failed.value.code() in (grpc.StatusCode.DATA_LOSS, grpc.StatusCode.UNAVAILABLE)
    assert "changed on disk while being served" in failed.value.details(), failed.value.details()
    assert what in failed.value.details(), failed.value.details()
    assert wait_not_serving(daemon), daemon.log()
    reply = daemon.vllm.HealthCheck(pb.HealthCheckRequest(), timeout=5)
    assert not reply.healthy and "changed on disk" in reply.message
    assert daemon.proc.poll() is None, daemon.log()
    assert "not serving any more" in daemon.log()


def test_model_truncated_while_serving_stops_serving_without_dying(tandemd, tmp_path):
    path = served_copy(tmp_path)
    d = tandemd(f"--model.path={path}")
    assert len(greedy(d)) == 8
    os.truncate(path, 1000)  # what `truncate -s 1000 model.gguf` does; used to be SIGBUS
    assert_stopped_serving(d, "a read went past its end")
    # Later calls get UNAVAILABLE naming the reason, and the daemon stops cleanly (teardown).
    with pytest.raises(grpc.RpcError) as again:
        greedy(d)
    assert again.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "stopped serving its model" in again.value.details()


def test_model_overwritten_in_place_stops_serving(tandemd, tmp_path):
    path = served_copy(tmp_path)
    d = tandemd(f"--model.path={path}")
    before = greedy(d)
    size = path.stat().st_size
    # dd if=/dev/zero of=model.gguf bs=1M conv=notrunc: same size, zeros over the weights. The
    # answers used to go on with every token id 0.
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", f"bs={size // 2}", "seek=1", "count=1",
                    "conv=notrunc", "status=none"], check=True)
    assert path.stat().st_size == size
    assert before
    assert_stopped_serving(d, "rewritten in place")


def test_model_changed_while_idle_turns_health_not_serving(tandemd, tmp_path):
    path = served_copy(tmp_path)
    d = tandemd(f"--model.path={path}")
    assert health_status(d) == health_pb2.HealthCheckResponse.SERVING
    os.truncate(path, 1000)
    assert wait_not_serving(d), d.log()
    assert "changed on disk while being served" in d.log()


def test_load_mode_read_is_immune_to_the_file_changing(tandemd, tmp_path):
    path = served_copy(tmp_path)
    mapped = tandemd(f"--model.path={path}")
    reference = greedy(mapped, 12)
    mapped.stop_and_check()
    d = tandemd(f"--model.path={path}", "--model.load_mode=read")
    assert "read into memory" in d.log()
    assert greedy(d, 12) == reference
    os.truncate(path, 1000)
    time.sleep(1.5)  # a watcher tick
    assert greedy(d, 12) == reference
    assert health_status(d) == health_pb2.HealthCheckResponse.SERVING


def test_tokenizer_export_ignores_a_planted_directory(tandemd, tmp_path):
    """A GGUF without model.tokenizer_dir exports its tokenizer into a new private directory:
    a directory planted at the old predictable name is neither used nor written through."""
    tmpdir = tmp_path / "tmp"
    planted = tmpdir / f"tandemd-tokenizer-{DEMO_GGUF.stem}"
    planted.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, planted / "config.json")
    (planted / "tokenizer.json").write_text("{}")
    d = tandemd(f"--model.path={DEMO_GGUF}", env={"TMPDIR": str(tmpdir)})
    info = d.vllm.GetModelInfo(pb.GetModelInfoRequest(), timeout=5)
    exported = info.tokenizer_path
    assert os.path.realpath(exported) != os.path.realpath(planted), exported
    assert os.path.dirname(exported) == str(tmpdir), exported
    assert os.path.basename(exported).startswith(f"tandemd-tokenizer-{DEMO_GGUF.stem}-")
    st = os.lstat(exported)
    assert st.st_uid == os.getuid() and (st.st_mode & 0o777) == 0o755
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json",
                 "generation_config.json"):
        assert os.path.isfile(os.path.join(exported, name))
        assert not os.path.islink(os.path.join(exported, name))
    assert victim.read_text() == "precious"
    d.stop_and_check()
    assert not os.path.exists(exported), "the exported directory outlived the daemon"
    assert victim.read_text() == "precious"


def test_tokenizer_export_into_a_configured_directory_replaces_planted_links(tandemd, tmp_path):
    """An operator's model.tokenizer_dir without tokenizer.json is written by replacing each file:
    a symlink already there is replaced, its target left alone."""
    out = tmp_path / "tok"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, out / "config.json")
    d = tandemd(f"--model.path={DEMO_GGUF}", f"--model.tokenizer_dir={out}")
    info = d.vllm.GetModelInfo(pb.GetModelInfoRequest(), timeout=5)
    assert os.path.realpath(info.tokenizer_path) == os.path.realpath(out)
    assert not os.path.islink(out / "config.json")
    assert '"eos_token_id"' in (out / "config.json").read_text()
    assert victim.read_text() == "precious"
    d.stop_and_check()
    assert (out / "tokenizer.json").is_file(), "an operator's directory must stay"
