#!/usr/bin/env python3
"""Exports the trained demo MoE model (train.py) as a Hugging Face folder and two GGUF files, and
writes the reference fixtures that Tandem's tests compare against.

Writes:
  models/demo/hf/            config.json, model.safetensors (BF16), tokenizer.json,
                             tokenizer_config.json (ChatML chat_template), generation_config.json
  models/demo/demo-moe-f32.gguf, models/demo/demo-moe-q8_0.gguf   (arch qwen3moe, gguf package)
  tests/fixtures/demo/expected.json        prompts, HF token ids, last-position logits, 32 greedy
                                           tokens, all from transformers in float32
  tests/fixtures/demo/tokenizer_cases.jsonl  {"text", "ids"} from the HF tokenizers library
  WORK_DIR/export_report.json              file sizes, expert usage, samples, checks
The reference model for the fixtures is the BF16 safetensors checkpoint as shipped, upcast to
float32 (so HF folder, GGUF files and fixtures all hold exactly the same weights).
Run: python scripts/demo_model/export.py WORK_DIR [REPO_ROOT]
"""
import hashlib
import json
import os
import random
import shutil
import sys

import gguf
import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import AutoTokenizer, Qwen3MoeForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_check import numpy_forward, read_gguf_weights  # noqa: E402

EOT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}")
PROMPTS = [
    ("moses", "And the LORD said unto Moses,"),
    ("beginning", "In the beginning"),
    ("chat", None),  # filled from the chat template below
]
CHAT_MESSAGES = [{"role": "user", "content":
                  "Blessed are the poor in spirit: for theirs is the kingdom of heaven."}]
N_GREEDY = 32


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_trained(work):
    """The model train.py saved in WORK_DIR/final, or (while training still runs) the last
    checkpoint WORK_DIR/ckpt.pt."""
    final = os.path.join(work, "final")
    if os.path.isdir(final):
        return Qwen3MoeForCausalLM.from_pretrained(final, dtype=torch.float32)
    import train  # noqa: E402  (same folder)
    model = Qwen3MoeForCausalLM(train.model_config())
    model.load_state_dict(torch.load(os.path.join(work, "ckpt.pt"), weights_only=False)["model"])
    print("note: exporting the intermediate checkpoint ckpt.pt")
    return model


def write_hf(model, work, hf_dir, tok_ids):
    os.makedirs(hf_dir, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(hf_dir)
    os.chmod(os.path.join(hf_dir, "model.safetensors"), 0o644)
    model.to(torch.float32)
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    # Hub Qwen3-MoE configs name the expert count num_experts; transformers 5 writes
    # num_local_experts. Keep both (same value) so either reader finds it.
    cfg["num_experts"] = cfg.get("num_local_experts", model.config.num_experts)
    with open(os.path.join(hf_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    shutil.copy(os.path.join(work, "tokenizer.json"), os.path.join(hf_dir, "tokenizer.json"))
    added = {str(tok_ids[t]): {"content": t, "lstrip": False, "normalized": False,
                               "rstrip": False, "single_word": False, "special": True}
             for t in (EOT, IM_START, IM_END)}
    tcfg = {
        "add_bos_token": False, "add_eos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": added, "additional_special_tokens": [IM_START, IM_END],
        "bos_token": None, "eos_token": IM_END, "pad_token": EOT, "unk_token": None,
        "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
        "errors": "replace", "model_max_length": model.config.max_position_embeddings,
        "split_special_tokens": False, "tokenizer_class": "PreTrainedTokenizerFast",
    }
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
        f.write("\n")
    gen = {"bos_token_id": tok_ids[EOT], "eos_token_id": [tok_ids[IM_END], tok_ids[EOT]],
           "pad_token_id": tok_ids[EOT], "do_sample": False, "max_new_tokens": 64}
    with open(os.path.join(hf_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")


def gguf_tokenizer(tok_json):
    """tokens, token types and merges in llama.cpp's gpt2 layout, from tokenizer.json."""
    vocab = dict(tok_json["model"]["vocab"])
    for a in tok_json["added_tokens"]:
        vocab[a["content"]] = a["id"]
    n = len(vocab)
    tokens = [None] * n
    for t, i in vocab.items():
        tokens[i] = t
    assert all(t is not None for t in tokens), "token ids are not contiguous"
    specials = {a["id"] for a in tok_json["added_tokens"] if a["special"]}
    types = [int(gguf.TokenType.CONTROL) if i in specials else int(gguf.TokenType.NORMAL)
             for i in range(n)]
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in tok_json["model"]["merges"]]
    return tokens, types, merges


def gguf_tensors(model):
    """(name, float32 numpy array) in llama.cpp qwen3moe naming, numpy (row-major) shapes."""
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    out = [("token_embd.weight", sd["model.embed_tokens.weight"])]
    for i in range(model.config.num_hidden_layers):
        p = f"model.layers.{i}."
        inter = model.config.moe_intermediate_size
        gate_up = sd[p + "mlp.experts.gate_up_proj"]  # [E, 2*I, H]: gate rows first, then up
        out += [
            (f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"]),
            (f"blk.{i}.attn_q.weight", sd[p + "self_attn.q_proj.weight"]),
            (f"blk.{i}.attn_k.weight", sd[p + "self_attn.k_proj.weight"]),
            (f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"]),
            (f"blk.{i}.attn_q_norm.weight", sd[p + "self_attn.q_norm.weight"]),
            (f"blk.{i}.attn_k_norm.weight", sd[p + "self_attn.k_norm.weight"]),
            (f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"]),
            (f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"]),
            (f"blk.{i}.ffn_gate_inp.weight", sd[p + "mlp.gate.weight"]),
            (f"blk.{i}.ffn_gate_exps.weight", np.ascontiguousarray(gate_up[:, :inter, :])),
            (f"blk.{i}.ffn_up_exps.weight", np.ascontiguousarray(gate_up[:, inter:, :])),
            (f"blk.{i}.ffn_down_exps.weight", sd[p + "mlp.experts.down_proj"]),  # [E, H, I]
        ]
    out += [("output_norm.weight", sd["model.norm.weight"]), ("output.weight", sd["lm_head.weight"])]
    return out


def keep_f32(name, arr):
    # As llama-quantize: 1-D tensors (norms) and the router stay F32.
    return arr.ndim == 1 or name.endswith("ffn_gate_inp.weight")


def write_gguf(path, model, tok_json, q8):
    c = model.config
    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_name("tandem-demo-moe-kjv")
    w.add_description("Tandem demo model: 4-layer, 16-expert Qwen3-MoE trained from scratch on the "
                      "King James Bible (public domain). See docs/demo-model.md.")
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0 if q8 else gguf.LlamaFileType.ALL_F32))
    if q8:
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.num_experts_per_tok * c.moe_intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_freq_base(float(c.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(float(c.rms_norm_eps))
    w.add_expert_count(c.num_experts)
    w.add_expert_used_count(c.num_experts_per_tok)
    w.add_expert_feed_forward_length(c.moe_intermediate_size)
    tokens, types, merges = gguf_tokenizer(tok_json)
    ids = {t: i for i, t in enumerate(tokens)}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(ids[EOT])
    w.add_eos_token_id(ids[IM_END])
    w.add_pad_token_id(ids[EOT])
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    for name, arr in gguf_tensors(model):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if q8 and not keep_f32(name, arr):
            w.add_tensor(name, gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@torch.no_grad()
def greedy(model, ids, n):
    """n greedy tokens (full recompute each step; argmax picks the lowest id on ties)."""
    seq = list(ids)
    toks, margins = [], []
    for _ in range(n):
        logits = model(input_ids=torch.tensor([seq])).logits[0, -1].float()
        top2 = torch.topk(logits, 2)
        t = int(torch.argmax(logits))
        toks.append(t)
        margins.append(float(top2.values[0] - top2.values[1]))
        seq.append(t)
    return toks, margins


@torch.no_grad()
def sample(model, ids, n, temperature, top_p, seed, stop_ids):
    torch.manual_seed(seed)
    out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=temperature > 0,
                         temperature=temperature if temperature > 0 else None,
                         top_p=top_p if temperature > 0 else None, top_k=None,
                         eos_token_id=sorted(stop_ids), pad_token_id=min(stop_ids))
    return out[0, len(ids):].tolist()


@torch.no_grad()
def expert_usage(model, valid_ids, seq=128, max_windows=64):
    """Per layer: how many of the held-out tokens' top-k slots each expert got."""
    c = model.config
    counts = np.zeros((c.num_hidden_layers, c.num_experts), dtype=np.int64)
    n = min((len(valid_ids) - 1) // seq, max_windows)
    for start in range(0, n, 8):
        rows = [valid_ids[i * seq:(i + 1) * seq] for i in range(start, min(n, start + 8))]
        x = torch.tensor(np.stack(rows).astype(np.int64))
        out = model(input_ids=x, output_router_logits=True)
        for layer, rl in enumerate(out.router_logits):
            top = torch.topk(rl.float(), c.num_experts_per_tok, dim=-1).indices.reshape(-1)
            counts[layer] += np.bincount(top.numpy(), minlength=c.num_experts)
    frac = counts / counts.sum(axis=1, keepdims=True)
    return {"tokens": int(n * seq), "counts": counts.tolist(),
            "fraction": [[round(float(v), 4) for v in row] for row in frac],
            "max_over_min": [round(float(r.max() / max(r.min(), 1e-9)), 2) for r in frac],
            "max_fraction": [round(float(r.max()), 4) for r in frac],
            "min_fraction": [round(float(r.min()), 4) for r in frac]}


def tokenizer_cases(tok, work, n=300):
    verses = [l.rstrip("\n").split("\t") for l in open(os.path.join(work, "kjv_verses.tsv"))]
    valid_text = open(os.path.join(work, "valid.txt"), encoding="utf-8").read()
    held = [v[3] for v in verses if f"{v[3]}\n" in valid_text]
    rng = random.Random(7)
    texts = rng.sample(held, n)
    # Multi-verse chunks with newlines, and some edge cases of the Qwen2 split regex.
    texts += ["\n".join(held[i:i + 3]) + "\n" for i in range(0, 60, 3)]
    texts += [
        "", " ", "\n", "\n\n", "  \n  ", "a  b   c", "Hello world", "hello   world!!!",
        "It's the LORD'S; they'll say I'm, you've, we'd, THEY'RE", "1 2 34 567 8901 3.14159",
        "Chapter 12:34-56", "tab\there", "trailing spaces   ", "   leading", "CRLF\r\nline",
        "naïve café, Æsop; Übermensch; 日本語; Ελληνικά; emoji 😀👍", "    indented\n\tcode",
        "<|im_start|>user\nWho is Moses?<|im_end|>\n<|im_start|>assistant\n",
        "text<|endoftext|>more", "<|im_end|><|im_end|>", "<|im_start|", "punct...!?;:--()[]{}",
        "don't DON'T Don'T", "x'sy", "'s", "'''", "ALLCAPS WORDS HERE", "a\u00a0b non-breaking",
        "\u200bzero width", "Ωmega", "numbers123abc456", "   \n\n   \n",
    ]
    out = []
    for t in texts:
        out.append({"text": t, "ids": tok.encode(t, add_special_tokens=False).ids})
    return out


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    work = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) == 3 else os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", ".."))
    torch.set_num_threads(1)  # 2 threads stall on OpenMP barriers when the cores are shared
    demo_dir = os.path.join(root, "models", "demo")
    hf_dir = os.path.join(demo_dir, "hf")
    fix_dir = os.path.join(root, "tests", "fixtures", "demo")
    os.makedirs(fix_dir, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(work, "tokenizer.json"))
    tok_json = json.load(open(os.path.join(work, "tokenizer.json"), encoding="utf-8"))
    tok_ids = {t: tok.token_to_id(t) for t in (EOT, IM_START, IM_END)}

    trained = load_trained(work)
    write_hf(trained, work, hf_dir, tok_ids)
    # The shipped weights are BF16; everything below uses them (upcast to float32).
    model = Qwen3MoeForCausalLM.from_pretrained(hf_dir, dtype=torch.float32,
                                                attn_implementation="eager")
    model.eval()

    f32_path = os.path.join(demo_dir, "demo-moe-f32.gguf")
    q8_path = os.path.join(demo_dir, "demo-moe-q8_0.gguf")
    write_gguf(f32_path, model, tok_json, q8=False)
    write_gguf(q8_path, model, tok_json, q8=True)

    hf_tok = AutoTokenizer.from_pretrained(hf_dir)
    chat_text = hf_tok.apply_chat_template(CHAT_MESSAGES, tokenize=False,
                                           add_generation_prompt=True)
    report = {"checks": {}}
    prompts = []
    for name, text in PROMPTS:
        if text is None:
            text = chat_text
        ids = tok.encode(text, add_special_tokens=False).ids
        hf_ids = hf_tok(text, add_special_tokens=False)["input_ids"]
        assert ids == hf_ids, (name, ids, hf_ids)
        with torch.no_grad():
            last = model(input_ids=torch.tensor([ids])).logits[0, -1].float().numpy()
        toks, margins = greedy(model, ids, N_GREEDY)
        prompts.append({
            "name": name, "text": text, "tokens": ids, "n_tokens": len(ids),
            "greedy_tokens": toks, "greedy_text": tok.decode(toks, skip_special_tokens=False),
            "greedy_top1_minus_top2": [float(np.float32(m)) for m in margins],
            "last_logits": [float(v) for v in last.astype(np.float32)],
        })
    expected = {
        "generator": "scripts/demo_model/export.py",
        "reference": "transformers Qwen3MoeForCausalLM, float32 (BF16 checkpoint upcast), "
                     "eager attention, full recompute per greedy step; tokens from the tokenizers "
                     "library (add_special_tokens=False, special tokens in text are parsed)",
        "torch_version": torch.__version__,
        "transformers_version": __import__("transformers").__version__,
        "tokenizers_version": __import__("tokenizers").__version__,
        "files": {os.path.relpath(p, root): sha256(p) for p in
                  (f32_path, q8_path, os.path.join(hf_dir, "model.safetensors"))},
        "n_vocab": model.config.vocab_size,
        "eos_token_ids": [tok_ids[IM_END], tok_ids[EOT]],
        "prompts": prompts,
    }
    with open(os.path.join(fix_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    cases = tokenizer_cases(tok, work)
    with open(os.path.join(fix_dir, "tokenizer_cases.jsonl"), "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    # The HF AutoTokenizer must agree with the raw tokenizers library on every case.
    report["checks"]["autotokenizer_agrees"] = all(
        hf_tok(c["text"], add_special_tokens=False)["input_ids"] == c["ids"] for c in cases)
    report["checks"]["decode_roundtrip"] = all(
        tok.decode(c["ids"], skip_special_tokens=False) == c["text"] for c in cases)

    # Independent check of the GGUF layout: a numpy forward pass over the GGUF tensors.
    for label, path in (("f32", f32_path), ("q8_0", q8_path)):
        weights, meta = read_gguf_weights(path)
        diffs, same_argmax = [], True
        for p in prompts:
            logits = numpy_forward(weights, meta, p["tokens"] + p["greedy_tokens"][:-1])
            diffs.append(float(np.abs(logits[len(p["tokens"]) - 1] - np.array(p["last_logits"])).max()))
            same_argmax &= bool((logits[len(p["tokens"]) - 1:].argmax(-1) == p["greedy_tokens"]).all())
        report["checks"][f"gguf_{label}_max_abs_logit_diff"] = max(diffs)
        report["checks"][f"gguf_{label}_greedy_matches"] = same_argmax

    valid_ids = np.load(os.path.join(work, "valid_ids.npy"))
    report["expert_usage_valid"] = expert_usage(model, valid_ids)
    samples = []
    for i, prompt in enumerate(["And the LORD said unto Moses,", "In the beginning",
                                "And Jesus answered and said unto them,", "The LORD is my"]):
        ids = tok.encode(prompt).ids
        g = sample(model, ids, 40, 0.0, 1.0, 0, {tok_ids[EOT]})
        s = sample(model, ids, 64, 0.8, 0.95, 100 + i, {tok_ids[EOT]})
        samples.append({"prompt": prompt, "greedy": tok.decode(g, skip_special_tokens=False),
                        "sampled_t0.8_p0.95": tok.decode(s, skip_special_tokens=False)})
    chat_ids = tok.encode(chat_text).ids
    s = sample(model, chat_ids, 64, 0.8, 0.95, 7, {tok_ids[IM_END], tok_ids[EOT]})
    samples.append({"prompt": chat_text, "sampled_t0.8_p0.95": tok.decode(s, skip_special_tokens=False)})
    report["samples"] = samples
    report["sizes"] = {os.path.relpath(os.path.join(dp, fn), root): os.path.getsize(os.path.join(dp, fn))
                       for dp, _, fns in os.walk(demo_dir) for fn in sorted(fns)}
    report["sizes"]["total_models_demo"] = sum(
        v for k, v in report["sizes"].items() if k.startswith("models/"))
    with open(os.path.join(work, "export_report.json"), "w") as f:
        json.dump(report, f, indent=1, ensure_ascii=False)
    print(json.dumps({k: v for k, v in report.items() if k != "expert_usage_valid"}, indent=1,
                     ensure_ascii=False))
    print("expert usage max/min per layer:", report["expert_usage_valid"]["max_over_min"])
    print("max fraction:", report["expert_usage_valid"]["max_fraction"],
          "min fraction:", report["expert_usage_valid"]["min_fraction"])


if __name__ == "__main__":
    main()
