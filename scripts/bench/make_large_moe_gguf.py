#!/usr/bin/env python3
"""Writes a random-weight MoE GGUF for `tandem bench` (weights far larger than caches).

Three architectures (--arch):
  qwen3moe (default)  Qwen3-MoE-shaped, every matrix Q8_0.
  deepseek2           llama.cpp's `deepseek2` architecture, shaped like DeepSeek-V3 scaled down
                      (12 layers, the first dense; hidden 2048; 16 heads of MLA with q LoRA 768,
                      kv LoRA 512, nope 128 + rope 64, v 128, split attn_k_b / attn_v_b; 64
                      experts top-6 in 8 groups keeping 4, sigmoid with exp_probs_b, scale 2.5,
                      expert FFN 1408, one shared expert; YaRN 40 x 4096): every matrix Q8_0,
                      routers and biases F32. ~7 GB with the demo vocabulary.
  gpt-oss             llama.cpp's `gpt-oss` architecture, shaped like gpt-oss-20b, in the layout of
                      real gpt-oss GGUFs (llama-quantize MXFP4_MOE): expert tensors MXFP4, attention,
                      token_embd and output Q8_0, router, norms, biases and attention sinks F32.

The weights are random: Q8_0 matrices are blocks of random int8 quants and one fp16 scale (values
of std ~0.02); MXFP4 experts are blocks of one random E8M0 exponent and 16 random bytes of E2M1
codes (gate/up: exponent 120..121, values of RMS ~0.036; down: 115..116, RMS ~0.0011, so the
residual stream stays tame). Everything is written block by block without quantizing floats, so
even the ~8 GB (qwen3moe) or ~11 GB (gpt-oss) default model takes minutes, not hours. Norms are 1,
routers are random F32 (so experts are picked about uniformly: a worst case for weight reuse);
gpt-oss biases are random (std 0.02) and sinks N(0, 1). The tokenizer (tokenizer.* keys) is copied
from another GGUF, by default the demo model, so the file loads and tokenizes like a real model.

The model is for throughput measurements only; it generates noise. Do not commit it
(/bench-models/ is in .gitignore).

Example (defaults: 24 layers, 64 experts, 8 per token, hidden 2048, expert FFN 768):
  python scripts/bench/make_large_moe_gguf.py bench-models/qwen3moe-24x64-q8_0.gguf
Smaller:
  python scripts/bench/make_large_moe_gguf.py out.gguf --layers 4 --experts 16 --hidden 512
gpt-oss-20b-shaped (24 layers, 32 experts top-4, hidden 2880, expert FFN 2880, 64 q / 8 kv heads of
dim 64, sliding window 128 on even layers, YaRN 32 x 4096, rope base 150000; ~10.9 GB with the demo
vocabulary):
  python scripts/bench/make_large_moe_gguf.py bench-models/gpt-oss-24x32-mxfp4.gguf --arch gpt-oss
Smaller gpt-oss (every shape flag overrides the gpt-oss default):
  python scripts/bench/make_large_moe_gguf.py out.gguf --arch gpt-oss --layers 2 --experts 8 \\
      --hidden 256 --expert-ffn 256 --heads 8 --kv-heads 2 --head-dim 32
"""

import argparse
import os
import shutil
import sys
import time

import gguf
import numpy as np

Q8_0 = gguf.GGMLQuantizationType.Q8_0
MXFP4 = gguf.GGMLQuantizationType.MXFP4
BLOCK = 32  # Q8_0 and MXFP4 values per block
BLOCK_BYTES = 34  # Q8_0: fp16 scale + 32 int8
MXFP4_BLOCK_BYTES = 17  # MXFP4: E8M0 exponent + 16 bytes of E2M1 nibbles
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_TOKENIZER = os.path.join(REPO, "models", "demo", "demo-moe-q8_0.gguf")

# Per-architecture defaults of the shape flags (a flag given on the command line wins).
ARCH_DEFAULTS = {
    "qwen3moe": dict(layers=24, experts=64, experts_used=8, hidden=2048, expert_ffn=768, heads=32,
                     kv_heads=4, head_dim=128, context=4096, rope_base=1000000.0, rms_eps=1e-6),
    # openai/gpt-oss-20b's config.json
    "gpt-oss": dict(layers=24, experts=32, experts_used=4, hidden=2880, expert_ffn=2880, heads=64,
                    kv_heads=8, head_dim=64, context=131072, rope_base=150000.0, rms_eps=1e-5,
                    sliding_window=128, yarn_factor=32.0, yarn_orig_context=4096),
    # DeepSeek-V3's config.json scaled down (layers, experts, widths); head_dim is the MLA v head.
    "deepseek2": dict(layers=12, experts=64, experts_used=6, hidden=2048, expert_ffn=1408,
                      heads=16, kv_heads=1, head_dim=128, context=163840, rope_base=10000.0,
                      rms_eps=1e-6),
}
# deepseek2's fixed MLA / router shape (DeepSeek-V3's ratios; not flags).
DS_Q_LORA, DS_KV_LORA, DS_NOPE, DS_ROPE = 768, 512, 128, 64
DS_DENSE_FFN, DS_GROUPS, DS_GROUPS_USED, DS_SCALE = 5632, 8, 4, 2.5
GPT_OSS_ONLY = ("sliding_window", "yarn_factor", "yarn_orig_context")
# MXFP4 E8M0 exponent ranges (inclusive) of the random expert blocks: value = e2m1 * 2^(e - 127).
MXFP4_EXP_GATE_UP = (120, 121)
MXFP4_EXP_DOWN = (115, 116)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("output", help="GGUF file to write")
    p.add_argument("--arch", choices=sorted(ARCH_DEFAULTS), default="qwen3moe",
                   help="architecture and default shape (default: qwen3moe)")
    p.add_argument("--layers", type=int, help="default 24")
    p.add_argument("--experts", type=int, help="default 64 (gpt-oss: 32)")
    p.add_argument("--experts-used", type=int, help="default 8 (gpt-oss: 4)")
    p.add_argument("--hidden", type=int, help="default 2048 (gpt-oss: 2880)")
    p.add_argument("--expert-ffn", type=int, help="default 768 (gpt-oss: 2880)")
    p.add_argument("--heads", type=int, help="default 32 (gpt-oss: 64)")
    p.add_argument("--kv-heads", type=int, help="default 4 (gpt-oss: 8)")
    p.add_argument("--head-dim", type=int, help="default 128 (gpt-oss: 64)")
    p.add_argument("--context", type=int, help="default 4096 (gpt-oss: 131072)")
    p.add_argument("--rope-base", type=float, help="RoPE freq base, default 1e6 (gpt-oss: 150000)")
    p.add_argument("--rms-eps", type=float, help="RMSNorm epsilon, default 1e-6 (gpt-oss: 1e-5)")
    p.add_argument("--sliding-window", type=int,
                   help="gpt-oss only: SWA window on even layers, default 128")
    p.add_argument("--yarn-factor", type=float, help="gpt-oss only: YaRN factor, default 32")
    p.add_argument("--yarn-orig-context", type=int,
                   help="gpt-oss only: YaRN original context length, default 4096")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer-from", default=DEFAULT_TOKENIZER,
                   help="GGUF whose tokenizer.* keys are copied (default: the demo model)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    a = p.parse_args()
    if a.arch != "gpt-oss":
        for name in GPT_OSS_ONLY:
            if getattr(a, name) is not None:
                p.error(f"--{name.replace('_', '-')} needs --arch gpt-oss")
            setattr(a, name, None)
    for name, value in ARCH_DEFAULTS[a.arch].items():
        if getattr(a, name) is None:
            setattr(a, name, value)
    positive = ["layers", "experts", "experts_used", "hidden", "expert_ffn", "heads", "kv_heads",
                "head_dim", "context", "rope_base", "rms_eps"]
    if a.arch == "gpt-oss":
        positive += list(GPT_OSS_ONLY)
    for name in positive:
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if a.arch == "gpt-oss" and a.yarn_factor < 1:
        p.error("--yarn-factor must be at least 1")
    if a.experts_used > a.experts:
        p.error("--experts-used must not exceed --experts")
    if a.arch == "deepseek2" and a.experts % DS_GROUPS:
        p.error(f"deepseek2: --experts must be a multiple of {DS_GROUPS} (expert groups)")
    if a.heads % a.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    if a.head_dim % 2:
        p.error("--head-dim must be even (RoPE)")
    for name in ("hidden", "expert_ffn"):
        if getattr(a, name) % BLOCK:
            p.error(f"--{name.replace('_', '-')} must be a multiple of {BLOCK} (Q8_0 / MXFP4 blocks)")
    if (a.heads * a.head_dim) % BLOCK:
        p.error(f"--heads x --head-dim must be a multiple of {BLOCK}")
    return a


def field_value(field):
    """The Python value of a GGUFReader field (scalar, string, or array of either)."""
    types = field.types
    if types[0] == gguf.GGUFValueType.ARRAY:
        if types[1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if types[0] == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def copy_tokenizer(writer, path):
    """Copies every tokenizer.* key of `path`; returns the vocabulary size."""
    reader = gguf.GGUFReader(path)
    n_vocab = None
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = field_value(field)
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_array(key, value)
        else:
            writer.add_key_value(key, value, vtype)
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(value)
    if n_vocab is None:
        sys.exit(f"{path} has no tokenizer.ggml.tokens")
    return n_vocab


def q8_0_random(rng, shape, std=0.02):
    """Random Q8_0 bytes for a float tensor of numpy shape `shape` (last dim % 32 == 0)."""
    rows = int(np.prod(shape[:-1]))
    nblocks = shape[-1] // BLOCK
    out = np.empty((rows, nblocks, BLOCK_BYTES), dtype=np.uint8)
    # Uniform int8 in [-127, 127] has std ~73.6; scale so that values have std `std`.
    scale = np.float16(std / 73.6)
    out[:, :, 0:2] = np.frombuffer(scale.tobytes(), dtype=np.uint8)
    out[:, :, 2:] = rng.integers(-127, 128, size=(rows, nblocks, BLOCK), dtype=np.int8).view(np.uint8)
    return out.reshape(*shape[:-1], nblocks * BLOCK_BYTES)


def mxfp4_random(rng, shape, exp_range):
    """Random MXFP4 bytes for a float tensor of numpy shape `shape` (last dim % 32 == 0).

    Each 32-value block: one E8M0 exponent byte e drawn from `exp_range` (inclusive), then 16 random
    bytes (two E2M1 codes each). ggml decodes value = kvalues[code] * 2^(e - 128) with the doubled
    E2M1 table (0, 1, 2, 3, 4, 6, 8, 12, and negatives), whose RMS over uniform codes is ~5.85, so
    the values have RMS ~5.85 * 2^(e - 128).
    """
    rows = int(np.prod(shape[:-1]))
    nblocks = shape[-1] // BLOCK
    out = np.empty((rows, nblocks, MXFP4_BLOCK_BYTES), dtype=np.uint8)
    out[:, :, 0] = rng.integers(exp_range[0], exp_range[1] + 1, size=(rows, nblocks), dtype=np.uint8)
    out[:, :, 1:] = rng.integers(0, 256, size=(rows, nblocks, MXFP4_BLOCK_BYTES - 1), dtype=np.uint8)
    return out.reshape(*shape[:-1], nblocks * MXFP4_BLOCK_BYTES)


def tensor_plan(a, n_vocab):
    """(name, numpy float shape, 'q8' | 'ones' | 'f32') in file order."""
    h, q_dim, kv_dim = a.hidden, a.heads * a.head_dim, a.kv_heads * a.head_dim
    plan = [("token_embd.weight", (n_vocab, h), "q8")]
    for i in range(a.layers):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", (h,), "ones"),
            (b + "attn_q.weight", (q_dim, h), "q8"),
            (b + "attn_k.weight", (kv_dim, h), "q8"),
            (b + "attn_v.weight", (kv_dim, h), "q8"),
            (b + "attn_q_norm.weight", (a.head_dim,), "ones"),
            (b + "attn_k_norm.weight", (a.head_dim,), "ones"),
            (b + "attn_output.weight", (h, q_dim), "q8"),
            (b + "ffn_norm.weight", (h,), "ones"),
            (b + "ffn_gate_inp.weight", (a.experts, h), "f32"),
            (b + "ffn_gate_exps.weight", (a.experts, a.expert_ffn, h), "q8"),
            (b + "ffn_up_exps.weight", (a.experts, a.expert_ffn, h), "q8"),
            (b + "ffn_down_exps.weight", (a.experts, h, a.expert_ffn), "q8"),
        ]
    plan += [("output_norm.weight", (h,), "ones"), ("output.weight", (n_vocab, h), "q8")]
    return plan


def tensor_plan_gpt_oss(a, n_vocab):
    """gpt-oss tensors as llama.cpp's LLM_ARCH_OPENAI_MOE loader creates them, in file order.

    Kinds: 'q8', 'ones', 'f32' (router), 'bias' (F32, std 0.02), 'sinks' (F32, N(0, 1)),
    'mxfp4_gu' / 'mxfp4_down' (MXFP4 experts). Shapes are numpy (row-major), the reverse of ggml ne.
    """
    h, e, f = a.hidden, a.experts, a.expert_ffn
    q_dim, kv_dim = a.heads * a.head_dim, a.kv_heads * a.head_dim
    plan = [("token_embd.weight", (n_vocab, h), "q8")]
    for i in range(a.layers):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", (h,), "ones"),
            (b + "attn_q.weight", (q_dim, h), "q8"),
            (b + "attn_q.bias", (q_dim,), "bias"),
            (b + "attn_k.weight", (kv_dim, h), "q8"),
            (b + "attn_k.bias", (kv_dim,), "bias"),
            (b + "attn_v.weight", (kv_dim, h), "q8"),
            (b + "attn_v.bias", (kv_dim,), "bias"),
            (b + "attn_output.weight", (h, q_dim), "q8"),
            (b + "attn_output.bias", (h,), "bias"),
            (b + "attn_sinks.weight", (a.heads,), "sinks"),
            (b + "post_attention_norm.weight", (h,), "ones"),
            (b + "ffn_gate_inp.weight", (e, h), "f32"),
            (b + "ffn_gate_inp.bias", (e,), "bias"),
            (b + "ffn_gate_exps.weight", (e, f, h), "mxfp4_gu"),
            (b + "ffn_gate_exps.bias", (e, f), "bias"),
            (b + "ffn_up_exps.weight", (e, f, h), "mxfp4_gu"),
            (b + "ffn_up_exps.bias", (e, f), "bias"),
            (b + "ffn_down_exps.weight", (e, h, f), "mxfp4_down"),
            (b + "ffn_down_exps.bias", (e, h), "bias"),
        ]
    plan += [("output_norm.weight", (h,), "ones"), ("output.weight", (n_vocab, h), "q8")]
    return plan


def tensor_plan_deepseek2(a, n_vocab):
    """deepseek2 tensors as llama.cpp's loader creates them (MLA layout, split k_b / v_b)."""
    h, e, f = a.hidden, a.experts, a.expert_ffn
    q_head = DS_NOPE + DS_ROPE
    plan = [("token_embd.weight", (n_vocab, h), "q8")]
    for i in range(a.layers):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", (h,), "ones"),
            (b + "attn_q_a.weight", (DS_Q_LORA, h), "q8"),
            (b + "attn_q_a_norm.weight", (DS_Q_LORA,), "ones"),
            (b + "attn_q_b.weight", (a.heads * q_head, DS_Q_LORA), "q8"),
            (b + "attn_kv_a_mqa.weight", (DS_KV_LORA + DS_ROPE, h), "q8"),
            (b + "attn_kv_a_norm.weight", (DS_KV_LORA,), "ones"),
            (b + "attn_k_b.weight", (a.heads, DS_KV_LORA, DS_NOPE), "q8"),
            (b + "attn_v_b.weight", (a.heads, a.head_dim, DS_KV_LORA), "q8"),
            (b + "attn_output.weight", (h, a.heads * a.head_dim), "q8"),
            (b + "ffn_norm.weight", (h,), "ones"),
        ]
        if i == 0:
            plan += [(b + "ffn_gate.weight", (DS_DENSE_FFN, h), "q8"),
                     (b + "ffn_up.weight", (DS_DENSE_FFN, h), "q8"),
                     (b + "ffn_down.weight", (h, DS_DENSE_FFN), "q8")]
            continue
        plan += [
            (b + "ffn_gate_inp.weight", (e, h), "f32"),
            (b + "exp_probs_b.bias", (e,), "bias"),
            (b + "ffn_gate_exps.weight", (e, f, h), "q8"),
            (b + "ffn_up_exps.weight", (e, f, h), "q8"),
            (b + "ffn_down_exps.weight", (e, h, f), "q8"),
            (b + "ffn_gate_shexp.weight", (f, h), "q8"),
            (b + "ffn_up_shexp.weight", (f, h), "q8"),
            (b + "ffn_down_shexp.weight", (h, f), "q8"),
        ]
    plan += [("output_norm.weight", (h,), "ones"), ("output.weight", (n_vocab, h), "q8")]
    return plan


def write_metadata_deepseek2(w, a):
    w.add_name(f"tandem-bench-random-deepseek2-{a.layers}x{a.experts}")
    w.add_description("Random weights for throughput benchmarks (scripts/bench/make_large_moe_gguf.py)")
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(a.context)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(DS_DENSE_FFN)
    w.add_leading_dense_block_count(1)
    w.add_head_count(a.heads)
    w.add_head_count_kv(1)
    w.add_q_lora_rank(DS_Q_LORA)
    w.add_kv_lora_rank(DS_KV_LORA)
    w.add_key_length(DS_KV_LORA + DS_ROPE)
    w.add_value_length(DS_KV_LORA)
    w.add_key_length_mla(DS_NOPE + DS_ROPE)
    w.add_value_length_mla(a.head_dim)
    w.add_rope_dimension_count(DS_ROPE)
    w.add_rope_freq_base(a.rope_base)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(40.0)
    w.add_rope_scaling_orig_ctx_len(4096)
    w.add_rope_scaling_yarn_log_mul(0.1)
    w.add_layer_norm_rms_eps(a.rms_eps)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    w.add_expert_feed_forward_length(a.expert_ffn)
    w.add_expert_shared_count(1)
    w.add_expert_weights_scale(DS_SCALE)
    w.add_expert_weights_norm(True)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_uint32("deepseek2.expert_group_count", DS_GROUPS)
    w.add_uint32("deepseek2.expert_group_used_count", DS_GROUPS_USED)


def write_metadata(w, a):
    if a.arch == "deepseek2":
        write_metadata_deepseek2(w, a)
        return
    gpt_oss = a.arch == "gpt-oss"
    w.add_name(f"tandem-bench-random-{'gpt-oss' if gpt_oss else 'qwen3moe'}-{a.layers}x{a.experts}")
    w.add_description("Random weights for throughput benchmarks (scripts/bench/make_large_moe_gguf.py)")
    file_type = gguf.LlamaFileType.MOSTLY_MXFP4_MOE if gpt_oss else gguf.LlamaFileType.MOSTLY_Q8_0
    w.add_file_type(int(file_type))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(a.context)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    # gpt-oss: the expert size, as the converter writes it (llama.cpp reads the expert key).
    w.add_feed_forward_length(a.expert_ffn if gpt_oss else a.experts_used * a.expert_ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(a.head_dim)  # also the RoPE dimension count
    w.add_value_length(a.head_dim)
    w.add_rope_freq_base(a.rope_base)
    if gpt_oss:
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(a.yarn_factor)
        w.add_rope_scaling_orig_ctx_len(a.yarn_orig_context)
        w.add_rope_scaling_yarn_beta_fast(32.0)  # written by the converter, not read by llama.cpp
        w.add_rope_scaling_yarn_beta_slow(1.0)
    w.add_layer_norm_rms_eps(a.rms_eps)
    if gpt_oss:
        w.add_sliding_window(a.sliding_window)  # no pattern key: llama.cpp makes even layers SWA
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    w.add_expert_feed_forward_length(a.expert_ffn)


def tensor_data(rng, shape, kind):
    if kind == "q8":
        return q8_0_random(rng, shape)
    if kind == "ones":
        return np.ones(shape, dtype=np.float32)
    if kind == "f32":  # router: logits of std ~1 for unit-RMS inputs
        return rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(shape[-1]))
    if kind == "bias":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    if kind == "sinks":
        return rng.standard_normal(shape, dtype=np.float32)
    if kind == "mxfp4_gu":
        return mxfp4_random(rng, shape, MXFP4_EXP_GATE_UP)
    if kind == "mxfp4_down":
        return mxfp4_random(rng, shape, MXFP4_EXP_DOWN)
    raise ValueError(kind)


def main():
    a = parse_args()
    if os.path.exists(a.output) and not a.force:
        sys.exit(f"{a.output} exists (use --force to overwrite)")
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)

    w = gguf.GGUFWriter(a.output, a.arch)
    write_metadata(w, a)
    n_vocab = copy_tokenizer(w, a.tokenizer_from)

    plan = {"gpt-oss": tensor_plan_gpt_oss, "deepseek2": tensor_plan_deepseek2}.get(
        a.arch, tensor_plan)(a, n_vocab)
    total = 0
    for name, shape, kind in plan:
        if kind in ("q8", "mxfp4_gu", "mxfp4_down"):
            qtype, bbytes = (Q8_0, BLOCK_BYTES) if kind == "q8" else (MXFP4, MXFP4_BLOCK_BYTES)
            byte_shape = (*shape[:-1], shape[-1] // BLOCK * bbytes)
            nbytes = int(np.prod(byte_shape))
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qtype)
        else:
            nbytes = int(np.prod(shape)) * 4
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes)
        total += nbytes
    need = total + (64 << 20)
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(a.output))).free
    if free < need:
        sys.exit(f"not enough disk: need {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free")
    print(f"writing {a.output}: {len(plan)} tensors, {total / 2**30:.2f} GiB of tensor data, "
          f"vocab {n_vocab}", flush=True)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    t0 = time.time()
    done = 0
    for name, shape, kind in plan:
        data = tensor_data(rng, shape, kind)
        w.write_tensor_data(data)
        done += data.nbytes
        if name.endswith("ffn_down_exps.weight") or name == "output.weight":
            print(f"  {name}: {done / 2**30:.2f} / {total / 2**30:.2f} GiB, "
                  f"{time.time() - t0:.0f} s", flush=True)
    w.close()
    print(f"done: {os.path.getsize(a.output):,} bytes in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
