#!/usr/bin/env python3
"""Trains the small Qwen3-MoE demo model on the token streams written by prepare.py.

CPU training with transformers' Qwen3MoeForCausalLM: AdamW, linear warm-up then cosine decay,
random windows of the training stream, a weak router load-balancing loss (so expert usage stays
uneven). Checkpoints (model + optimizer + step) go to WORK_DIR/ckpt.pt every --ckpt-every steps
and training resumes from there if the file exists; the log goes to WORK_DIR/train_log.jsonl.
At the end WORK_DIR/final/ holds the trained model (save_pretrained, float32).
Run: nice -n 15 python scripts/demo_model/train.py WORK_DIR [--time-budget S] [--steps N] [--threads 1]
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

VOCAB_SIZE = 4096
EOT_ID, IM_START_ID, IM_END_ID = 4093, 4094, 4095


def model_config():
    return Qwen3MoeConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=128,  # dense FFN size; unused because every layer is MoE
        num_hidden_layers=4,
        num_attention_heads=8,  # 8 x 32 = 256 != hidden_size, as in Qwen3-30B-A3B (32 x 128 vs 2048)
        num_key_value_heads=4,
        head_dim=32,
        hidden_act="silu",
        max_position_embeddings=512,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        use_cache=True,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        attention_bias=False,
        attention_dropout=0.0,
        decoder_sparse_step=1,
        moe_intermediate_size=64,
        num_experts_per_tok=2,
        num_experts=16,
        norm_topk_prob=True,
        output_router_logits=False,
        router_aux_loss_coef=0.001,
        mlp_only_layers=[],
        bos_token_id=EOT_ID,
        eos_token_id=IM_END_ID,
        pad_token_id=EOT_ID,
    )


def progress(step, elapsed, args):
    """Fraction of training done: by steps, or by wall-clock time when --time-budget is set (the
    CPU is shared, so a fixed time keeps the run bounded); whichever is further along."""
    p = step / args.steps
    if args.time_budget > 0:
        p = max(p, elapsed / args.time_budget)
    return min(p, 1.0)


def lr_at(step, prog, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = prog
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def eval_loss(model, ids, seq, max_windows=None):
    """Mean next-token loss over consecutive non-overlapping windows of `ids`."""
    model.eval()
    n = (len(ids) - 1) // seq
    if max_windows:
        n = min(n, max_windows)
    total, count = 0.0, 0
    for start in range(0, n, 8):
        rows = [ids[i * seq:i * seq + seq + 1] for i in range(start, min(n, start + 8))]
        x = torch.tensor(np.stack(rows).astype(np.int64))
        logits = model(input_ids=x[:, :-1]).logits.float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 x[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += x[:, 1:].numel()
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--time-budget", type=float, default=0.0, help="seconds; 0 = steps only")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    # One thread: with two, OpenMP barriers stalled (about 10x slower) while C++ builds shared the cores.
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--experts-impl", default="eager")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (weights stay float32)")
    ap.add_argument("--bench", type=int, default=0, help="time this many steps and exit")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    train_ids = np.load(os.path.join(args.work, "train_ids.npy"))
    valid_ids = np.load(os.path.join(args.work, "valid_ids.npy"))
    cfg = model_config()
    cfg._experts_implementation = args.experts_impl
    model = Qwen3MoeForCausalLM(cfg)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    ckpt_path = os.path.join(args.work, "ckpt.pt")
    log_path = os.path.join(args.work, "train_log.jsonl")
    step = 0
    rng = np.random.default_rng(4321)
    if os.path.exists(ckpt_path) and not args.bench:
        ck = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step = ck["step"]
        rng.bit_generator.state = ck["rng"]
        print(f"resumed at step {step}")
    print(f"params {n_params:,}  train tokens {len(train_ids):,}  valid tokens {len(valid_ids):,}")
    t0 = time.time()
    elapsed_before = 0.0
    if os.path.exists(ckpt_path) and not args.bench:
        elapsed_before = ck.get("elapsed", 0.0)
    log = open(log_path, "a") if not args.bench else None
    loss_acc, n_acc = 0.0, 0
    while True:
        prog = progress(step, elapsed_before + time.time() - t0, args)
        if prog >= 1.0 or step >= args.steps:
            break
        lr = lr_at(step, prog, args)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.integers(0, len(train_ids) - args.seq - 1, args.batch)
        x = torch.tensor(np.stack([train_ids[s:s + args.seq + 1] for s in starts]).astype(np.int64))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            out = model(input_ids=x[:, :-1], output_router_logits=True)
        logits = out.logits.float()
        lm_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                    x[:, 1:].reshape(-1))
        loss = lm_loss + cfg.router_aux_loss_coef * out.aux_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        loss_acc += lm_loss.item()
        n_acc += 1
        if args.bench and step >= args.bench:
            dt = time.time() - t0
            print(f"bench: {step} steps in {dt:.1f}s = {dt / step:.2f} s/step, "
                  f"{step * args.batch * args.seq / dt:.0f} tok/s, loss {lm_loss.item():.3f}")
            return
        if step % 10 == 0:
            el = elapsed_before + time.time() - t0
            rec = {"step": step, "loss": round(loss_acc / n_acc, 4), "aux": round(out.aux_loss.item(), 4),
                   "lr": lr, "elapsed_s": round(el, 1)}
            loss_acc, n_acc = 0.0, 0
            if step % args.eval_every == 0:
                rec["valid_loss"] = round(eval_loss(model, valid_ids, args.seq, max_windows=32), 4)
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
        if step % args.ckpt_every == 0:
            tmp = ckpt_path + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "rng": rng.bit_generator.state,
                        "elapsed": elapsed_before + time.time() - t0}, tmp)
            os.replace(tmp, ckpt_path)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "rng": rng.bit_generator.state, "elapsed": elapsed_before + time.time() - t0},
               ckpt_path)
    full_valid = eval_loss(model, valid_ids, args.seq)
    summary = {"steps": step, "tokens_seen": step * args.batch * args.seq,
               "train_seconds": round(elapsed_before + time.time() - t0, 1),
               "valid_loss": round(full_valid, 4), "valid_ppl": round(math.exp(full_valid), 3),
               "params": n_params}
    print(json.dumps(summary))
    with open(os.path.join(args.work, "train_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    model.save_pretrained(os.path.join(args.work, "final"))


if __name__ == "__main__":
    main()
