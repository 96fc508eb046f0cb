# Low-bit GGUFs end to end against llama.cpp: tiny Qwen3-MoE-shaped models that llama-quantize
# wrote as Q2_K (Q2_K + Q3_K tensors), Q3_K_M, IQ4_XS, IQ4_NL and the grid i-quant recipes IQ1_S,
# IQ1_M, IQ2_XXS, IQ2_XS, IQ2_M (IQ2_S + IQ3_S), IQ3_XXS and IQ3_S (each with some K-quant
# tensors), decoded greedily by `tandem generate` and compared with llama.cpp 0.5.0's greedy
# tokens (tests/fixtures/gguf/lowbit, made by scripts/fixtures/make_lowbit_quant_fixtures.py).
#
# Both sides quantize the activations (Q8_K for the K-quants, IQ4_XS and the grid i-quants, Q8_0
# for IQ4_NL) but sum
# in different orders, and llama.cpp's references re-ran the whole sequence as one batch at every
# step, so logits differ by up to ~3e-2 (llama.cpp's own batched and token-by-token runs differ by
# as much). The bound: tokens are identical up to the first difference, and that difference falls
# on a step where llama.cpp's top-two log-probabilities are within MARGIN of each other (or where
# it gave none).
import json

import pytest
from conftest import REPO, tandem_cli_json

LOWBIT = REPO / "tests/fixtures/gguf/lowbit"
REFS = json.loads((LOWBIT / "references.json").read_text())
MARGIN = 3e-2
# Each file must agree with llama.cpp on at least this many of its 64 steps (4 prompts x 16),
# so a file that diverges at every near-tie it meets still has to match most of the way.
MIN_IDENTICAL_STEPS = 32


@pytest.mark.parametrize("name", sorted(REFS))
def test_greedy_equals_llama_cpp_up_to_a_near_tie(name):
    identical = 0
    for prompt_name, ref in REFS[name].items():
        want = ref["tokens"]
        got = tandem_cli_json("--model", str(LOWBIT / name), "--prompt-ids",
                              " ".join(map(str, ref["prompt"])), "--max-tokens", str(len(want)),
                              "--ignore-eos", "--threads", "2")["token_ids"]
        assert len(got) == len(want)
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(want))
        if first < len(want):
            margin = ref["margins"][first]
            assert margin is None or margin < MARGIN, (
                f"{name} {prompt_name}: step {first} gave {got[first]}, llama.cpp {want[first]} "
                f"with a clear margin {margin}; tokens {got} vs {want}")
        identical += first
    assert identical >= MIN_IDENTICAL_STEPS, f"{name}: only {identical} steps agree"
