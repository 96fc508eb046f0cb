"""A float64 numpy forward pass over a qwen3moe GGUF file, used by export.py to check the GGUF
tensor layout independently of transformers (weights dequantized to float; activations are not
quantized, so a Q8_0 file differs slightly from llama.cpp's integer dot products)."""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def read_gguf_weights(path):
    r = GGUFReader(path)
    meta = {}
    for k, f in r.fields.items():
        if k.startswith("qwen3moe."):
            meta[k[len("qwen3moe."):]] = f.contents()
    weights = {}
    for t in r.tensors:
        # t.shape is ggml ne[] (fastest first); numpy shape is its reverse.
        arr = dequantize(t.data, t.tensor_type).reshape(tuple(int(d) for d in reversed(t.shape)))
        weights[t.name] = arr.astype(np.float64)
    return weights, meta


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _rope_neox(x, pos, base):
    d = x.shape[-1]
    half = d // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2 / d)
    ang = pos[:, None] * inv[None, :]  # [n, half]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)


def numpy_forward(w, meta, ids):
    """Logits [n, n_vocab] for token ids at positions 0..n-1 (causal, no cache)."""
    n = len(ids)
    n_head, n_kv = meta["attention.head_count"], meta["attention.head_count_kv"]
    hd = meta["attention.key_length"]
    eps = meta["attention.layer_norm_rms_epsilon"]
    base = meta["rope.freq_base"]
    k_used = meta["expert_used_count"]
    pos = np.arange(n, dtype=np.float64)
    x = w["token_embd.weight"][ids]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(meta["block_count"]):
        p = f"blk.{i}."
        h = _rms(x, w[p + "attn_norm.weight"], eps)
        q = (h @ w[p + "attn_q.weight"].T).reshape(n, n_head, hd)
        k = (h @ w[p + "attn_k.weight"].T).reshape(n, n_kv, hd)
        v = (h @ w[p + "attn_v.weight"].T).reshape(n, n_kv, hd)
        q = _rope_neox(_rms(q, w[p + "attn_q_norm.weight"], eps), pos, base)
        k = _rope_neox(_rms(k, w[p + "attn_k_norm.weight"], eps), pos, base)
        heads = []
        for j in range(n_head):
            kv = j // (n_head // n_kv)
            s = q[:, j] @ k[:, kv].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            heads.append(s @ v[:, kv])
        x = x + np.concatenate(heads, -1) @ w[p + "attn_output.weight"].T
        h = _rms(x, w[p + "ffn_norm.weight"], eps)
        r = h @ w[p + "ffn_gate_inp.weight"].T
        pr = np.exp(r - r.max(-1, keepdims=True))
        pr /= pr.sum(-1, keepdims=True)
        out = np.zeros_like(x)
        for t in range(n):
            top = np.argsort(-pr[t], kind="stable")[:k_used]
            ws = pr[t, top] / pr[t, top].sum()
            for e, we in zip(top, ws):
                g = w[p + "ffn_gate_exps.weight"][e] @ h[t]
                u = w[p + "ffn_up_exps.weight"][e] @ h[t]
                out[t] += we * (w[p + "ffn_down_exps.weight"][e] @ (g / (1 + np.exp(-g)) * u))
        x = x + out
    return _rms(x, w["output_norm.weight"], eps) @ w["output.weight"].T
