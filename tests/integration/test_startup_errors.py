# Integration tests of tandemd's refusals to start and their exit codes (docs/deployment.md):
# 2 for configuration the daemon cannot use, 3 for a model it cannot serve as configured, 1 for
# failures a restart may cure. Each run must end within seconds, with a message naming the cause.
import json
import socket
import subprocess

from conftest import DEMO_GGUF, REPO, TANDEMD, TINY_F32, free_port

EXIT_FAILURE = 1
EXIT_BAD_CONFIG = 2
EXIT_BAD_MODEL = 3


def run_tandemd(*flags, port=None, timeout=60):
    """Runs tandemd to its exit; returns (exit code, combined output)."""
    argv = [str(TANDEMD), f"--server.port={port or free_port()}",
            f"--metrics.port={free_port()}", *flags]
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO,
                         timeout=timeout)
    return out.returncode, out.stdout.decode(errors="replace")


def test_stats_output_in_a_missing_directory_is_refused_at_startup(tmp_path):
    path = tmp_path / "no-such-dir" / "stats.json"
    rc, log = run_tandemd(f"--placement.stats_output_path={path}")
    assert rc == EXIT_BAD_CONFIG, log
    assert "placement.stats_output_path" in log and str(path) in log, log
    # Refused before the model loads.
    assert "serving model" not in log and "layers," not in log, log


def test_context_length_above_the_models_is_refused(tmp_path):
    rc, log = run_tandemd(f"--model.path={DEMO_GGUF}", "--model.context_length=100000")
    assert rc == EXIT_BAD_MODEL, log
    assert "model.context_length 100000" in log and "512 tokens" in log, log


def test_corrupt_model_file_is_a_permanent_error(tmp_path):
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(TINY_F32.read_bytes()[:1000])
    rc, log = run_tandemd(f"--model.path={truncated}")
    assert rc == EXIT_BAD_MODEL, log
    assert str(truncated) in log, log

    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"\x00" * 4096)
    rc, log = run_tandemd(f"--model.path={garbage}")
    assert rc == EXIT_BAD_MODEL, log

    # A damaged magic is named as such, not read as a safetensors header length.
    typo = tmp_path / "typo.gguf"
    typo.write_bytes(b"GGUG" + TINY_F32.read_bytes()[4:4096])
    rc, log = run_tandemd(f"--model.path={typo}")
    assert rc == EXIT_BAD_MODEL, log
    assert "neither a GGUF file" in log and "47 47 55 47" in log, log
    assert "header" not in log.replace("JSON header", ""), log


def test_model_format_that_disagrees_with_the_file_is_refused():
    rc, log = run_tandemd(f"--model.path={DEMO_GGUF}", "--model.format=safetensors")
    assert rc == EXIT_BAD_MODEL, log
    assert f"model.format is safetensors but {DEMO_GGUF} is a GGUF file" in log, log


def test_a_port_in_use_is_a_transient_failure():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        rc, log = run_tandemd(port=taken.getsockname()[1])
    assert rc == EXIT_FAILURE, log
    assert "cannot listen" in log, log


def test_json_logging_keeps_grpc_core_lines_json():
    """gRPC core reports the failed bind itself; with logging.format json that line is JSON too."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        rc, log = run_tandemd("--logging.format=json", port=taken.getsockname()[1])
    assert rc == EXIT_FAILURE, log
    lines = [line for line in log.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # fails on any plain-text line
    assert any(r["msg"].startswith("grpc: ") and "Address already in use" in r["msg"]
               for r in records), log
