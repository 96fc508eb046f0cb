#!/usr/bin/env python3
"""Writes a random-weight Qwen3-MoE-shaped HF checkpoint in block-scaled FP8 for `tandem bench`.

The layout of the published FP8 checkpoints (Qwen3-30B-A3B-FP8, DeepSeek-V3, Kimi-K2): config.json
with quantization_config {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
"weight_block_size": [128, 128]}; every linear weight of the layers (q/k/v/o, every expert's
gate/up/down) is F8_E4M3 with its `<name>_scale_inv` F32 [ceil(rows/128), ceil(cols/128)];
embeddings, lm_head, norms and routers are BF16. Default shape: the qwen3moe model of
make_large_moe_gguf.py (24 layers, 64 experts top-8, hidden 2048, expert FFN 768, 32 q / 4 kv
heads of 128), with Qwen3's vocabulary size (151936; the weights are random, there is no
tokenizer: `tandem bench` feeds token ids).

Codes are random with exponent fields 5..8 (|value| 0.25..3.75, either sign) and block scales
~0.01, so weights are ~0.02 in size and the residual stream stays tame. The file is written
tensor by tensor (safetensors by hand: numpy has no float8 dtype). ~7.6 GB by default. For
throughput measurements only (it generates noise); do not commit it.

  python scripts/bench/make_fp8_moe_hf.py bench-models/qwen3moe-24x64-fp8
"""

import argparse
import json
import os

import numpy as np

BLOCK = 128


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--experts", type=int, default=64)
    p.add_argument("--experts-used", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--expert-ffn", type=int, default=768)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def plan(a):
    """(name, shape, kind): kind fp8 (a weight plus its scale), bf16, ones."""
    h, q, kv = a.hidden, a.heads * a.head_dim, a.kv_heads * a.head_dim
    out = [("model.embed_tokens.weight", (a.vocab, h), "bf16")]
    for layer in range(a.layers):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", (h,), "ones"),
                (p + "self_attn.q_proj.weight", (q, h), "fp8"),
                (p + "self_attn.k_proj.weight", (kv, h), "fp8"),
                (p + "self_attn.v_proj.weight", (kv, h), "fp8"),
                (p + "self_attn.o_proj.weight", (h, q), "fp8"),
                (p + "self_attn.q_norm.weight", (a.head_dim,), "ones"),
                (p + "self_attn.k_norm.weight", (a.head_dim,), "ones"),
                (p + "post_attention_layernorm.weight", (h,), "ones"),
                (p + "mlp.gate.weight", (a.experts, h), "bf16")]
        for e in range(a.experts):
            x = f"{p}mlp.experts.{e}."
            out += [(x + "gate_proj.weight", (a.expert_ffn, h), "fp8"),
                    (x + "up_proj.weight", (a.expert_ffn, h), "fp8"),
                    (x + "down_proj.weight", (h, a.expert_ffn), "fp8")]
    out += [("model.norm.weight", (h,), "ones"), ("lm_head.weight", (a.vocab, h), "bf16")]
    return out


def entries(a):
    """Every tensor of the file: (name, dtype, shape, byte count, kind)."""
    for name, shape, kind in plan(a):
        n = int(np.prod(shape))
        if kind == "fp8":
            yield name, "F8_E4M3", shape, n, kind
            s = (-(-shape[0] // BLOCK), -(-shape[1] // BLOCK))
            yield name + "_scale_inv", "F32", s, 4 * s[0] * s[1], "scale"
        else:
            yield name, "BF16", shape, 2 * n, kind


def data(kind, shape, rng):
    n = int(np.prod(shape))
    if kind == "fp8":
        x = rng.integers(0, 128, n, dtype=np.uint8)
        sign = rng.integers(0, 2, n, dtype=np.uint8) << 7
        return (sign | ((5 + ((x >> 3) & 3)) << 3) | (x & 7)).astype(np.uint8).tobytes()
    if kind == "scale":
        return (0.01 * (1.0 + 0.1 * rng.random(n))).astype("<f4").tobytes()
    if kind == "ones":
        return np.full(n, 0x3F80, dtype="<u2").tobytes()  # bf16 1.0
    values = (0.02 * rng.standard_normal(n)).astype(np.float32)
    return (values.view(np.uint32) >> 16).astype("<u2").tobytes()  # bf16 by truncation


def main():
    a = parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    listed = list(entries(a))
    for name, dtype, shape, size, _ in listed:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path = os.path.join(a.out_dir, "model.safetensors")
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for name, _, shape, size, kind in listed:
            chunk = data(kind, shape, rng)
            assert len(chunk) == size, name
            f.write(chunk)
    config = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "vocab_size": a.vocab, "hidden_size": a.hidden, "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
        "head_dim": a.head_dim, "intermediate_size": 4 * a.hidden,
        "moe_intermediate_size": a.expert_ffn, "num_experts": a.experts,
        "num_experts_per_tok": a.experts_used, "norm_topk_prob": True, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "tie_word_embeddings": False, "bos_token_id": 1,
        "eos_token_id": 2, "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"{path}: {len(listed)} tensors, {os.path.getsize(path) / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
