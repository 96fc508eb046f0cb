#!/usr/bin/env python3
"""Writes a random-weight Qwen3-MoE-shaped GGUF for `tandem bench` (weights far larger than caches).

The weights are random: matrices are Q8_0 blocks with random int8 quants and one fp16 scale
(values of std ~0.02), written block by block without quantizing floats, so even the ~8 GB default
model takes minutes, not hours. Norms are 1, routers are random F32 (so experts are picked about
uniformly: a worst case for weight reuse). The tokenizer (tokenizer.* keys) is copied from another
GGUF, by default the demo model, so the file loads and tokenizes like a real model.

The model is for throughput measurements only; it generates noise. Do not commit it
(/bench-models/ is in .gitignore).

Example (defaults: 24 layers, 64 experts, 8 per token, hidden 2048, expert FFN 768):
  python scripts/bench/make_large_moe_gguf.py bench-models/qwen3moe-24x64-q8_0.gguf
Smaller:
  python scripts/bench/make_large_moe_gguf.py out.gguf --layers 4 --experts 16 --hidden 512
"""

import argparse
import os
import shutil
import sys
import time

import gguf
import numpy as np

Q8_0 = gguf.GGMLQuantizationType.Q8_0
BLOCK = 32  # Q8_0 values per block
BLOCK_BYTES = 34  # fp16 scale + 32 int8
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_TOKENIZER = os.path.join(REPO, "models", "demo", "demo-moe-q8_0.gguf")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("output", help="GGUF file to write")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--experts", type=int, default=64)
    p.add_argument("--experts-used", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--expert-ffn", type=int, default=768)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--context", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer-from", default=DEFAULT_TOKENIZER,
                   help="GGUF whose tokenizer.* keys are copied (default: the demo model)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    a = p.parse_args()
    for name in ("layers", "experts", "experts_used", "hidden", "expert_ffn", "heads", "kv_heads",
                 "head_dim", "context"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if a.experts_used > a.experts:
        p.error("--experts-used must not exceed --experts")
    if a.heads % a.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    for name in ("hidden", "expert_ffn"):
        if getattr(a, name) % BLOCK:
            p.error(f"--{name.replace('_', '-')} must be a multiple of {BLOCK} (Q8_0 blocks)")
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


def main():
    a = parse_args()
    if os.path.exists(a.output) and not a.force:
        sys.exit(f"{a.output} exists (use --force to overwrite)")
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)

    w = gguf.GGUFWriter(a.output, "qwen3moe")
    w.add_name(f"tandem-bench-random-qwen3moe-{a.layers}x{a.experts}")
    w.add_description("Random weights for throughput benchmarks (scripts/bench/make_large_moe_gguf.py)")
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(a.context)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.experts_used * a.expert_ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(a.head_dim)
    w.add_value_length(a.head_dim)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    w.add_expert_feed_forward_length(a.expert_ffn)
    n_vocab = copy_tokenizer(w, a.tokenizer_from)

    plan = tensor_plan(a, n_vocab)
    total = 0
    for name, shape, kind in plan:
        if kind == "q8":
            byte_shape = (*shape[:-1], shape[-1] // BLOCK * BLOCK_BYTES)
            nbytes = int(np.prod(byte_shape))
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=Q8_0)
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
        if kind == "q8":
            data = q8_0_random(rng, shape)
        elif kind == "ones":
            data = np.ones(shape, dtype=np.float32)
        else:  # router: logits of std ~1 for unit-RMS inputs
            data = rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(shape[-1]))
        w.write_tensor_data(data)
        done += data.nbytes
        if name.endswith("ffn_down_exps.weight") or name == "output.weight":
            print(f"  {name}: {done / 2**30:.2f} / {total / 2**30:.2f} GiB, "
                  f"{time.time() - t0:.0f} s", flush=True)
    w.close()
    print(f"done: {os.path.getsize(a.output):,} bytes in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
