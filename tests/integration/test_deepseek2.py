# tandemd serving a deepseek2 (DeepSeek-V3 / Kimi-K2 shaped) GGUF: MLA attention with its
# keys-only paged KV pool, the DeepSeek router, batching, the prefix cache and n > 1, checked
# against llama.cpp's greedy references (shared/data/tiny-deepseek2) and tandem generate.
import json
import threading

import pytest

from conftest import SHARED, generate, generate_samples, tandem_cli_json

DS_DIR = SHARED / "data/tiny-deepseek2"
DS_F32 = DS_DIR / "tiny-deepseek2-f32.gguf"
DS_Q4 = DS_DIR / "tiny-deepseek2-q4_k_m.gguf"
REF_F32 = json.loads((DS_DIR / "ref-f32.json").read_text())


@pytest.fixture(scope="module")
def deepseek(module_tandemd):
    return module_tandemd.start(f"--model.path={DS_F32}")


@pytest.mark.parametrize("prompt", REF_F32["prompts"], ids=lambda p: p["name"])
def test_greedy_equals_llama_cpp(deepseek, prompt):
    want = prompt["greedy_tokens"]
    _, done = generate(deepseek, prompt["tokens"], max_tokens=len(want), ignore_eos=True)
    assert list(done.output_ids) == want


def test_concurrent_requests_each_equal_llama_cpp(deepseek):
    """The three prompts at once share forward passes (one batch of MLA attention over three
    block tables); each still gets llama.cpp's tokens."""
    results = {}

    def run(p):
        _, done = generate(deepseek, p["tokens"], max_tokens=16, ignore_eos=True)
        results[p["name"]] = list(done.output_ids)

    threads = [threading.Thread(target=run, args=(p,)) for p in REF_F32["prompts"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {p["name"]: p["greedy_tokens"] for p in REF_F32["prompts"]}


def test_second_turn_reuses_the_latent_cache(deepseek):
    """The prefix cache holds MLA's latent rows like any other KV: a second turn reports the
    reused tokens and computes what tandem generate computes from scratch."""
    prompt = list(reversed(REF_F32["prompts"][2]["tokens"]))  # 48 tokens no other test sends
    _, first = generate(deepseek, prompt, max_tokens=8, ignore_eos=True)
    assert first.cached_tokens == 0
    turn2 = prompt + list(first.output_ids) + REF_F32["prompts"][0]["tokens"][:5]
    _, done = generate(deepseek, turn2, max_tokens=8, ignore_eos=True)
    assert done.cached_tokens == 48  # 3 full blocks of 16 (the last prompt token is recomputed)
    cli = tandem_cli_json("--model", str(DS_F32), "--prompt-ids", " ".join(map(str, turn2)),
                          "--max-tokens", "8", "--ignore-eos")
    assert list(done.output_ids) == cli["token_ids"]


def test_n_samples_fork_the_latent_cache(deepseek):
    """n = 3 samples share the prompt's latent blocks; sample i equals the one-sample request
    seeded with seed + i."""
    prompt = REF_F32["prompts"][1]["tokens"]
    sampling = dict(temperature=1.0, max_tokens=6, ignore_eos=True)
    got = generate_samples(deepseek, prompt, stream=False, n=3, seed=41, **sampling)
    assert sorted(got) == [0, 1, 2]
    for i, (_, done) in got.items():
        _, alone = generate(deepseek, prompt, seed=41 + i, **sampling)
        assert list(done.output_ids) == list(alone.output_ids), f"sample {i}"
    assert got[0][1].output_ids != got[1][1].output_ids


def test_q4_k_m_file_serves(module_tandemd):
    d = module_tandemd.start(f"--model.path={DS_Q4}")
    ref = json.loads((DS_DIR / "ref-q4_k_m.json").read_text())
    p = ref["prompts"][0]
    _, done = generate(d, p["tokens"], max_tokens=16, ignore_eos=True)
    assert list(done.output_ids) == p["greedy_tokens"]
