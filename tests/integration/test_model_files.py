# Integration tests of what tandemd does with files other local users or the operator can touch:
# the exported tokenizer directory (issue 18 item 2).
import os

from smg_grpc_proto import vllm_engine_pb2 as pb

from conftest import DEMO_GGUF


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
