#!/usr/bin/env python3
"""Builds the demo model's corpus and byte-level BPE tokenizer from the King James Bible.

Reads the KJV text with the `bible` program of Debian's bible-kjv / bible-kjv-text packages
(public domain text, see README.md), splits it by book into train and held-out sets, trains a
Qwen2-style byte-level BPE with the `tokenizers` package and writes, under the work directory:
  kjv_verses.tsv      book<TAB>chapter<TAB>verse<TAB>text, one verse a line, whole Bible
  train.txt/valid.txt the plain text of each split (verses one a line, chapters separated by a
                      blank line) -- what the BPE is trained on (train.txt only)
  tokenizer.json      the trained tokenizer (4093 BPE tokens + 3 ChatML special tokens)
  train_ids.npy       uint16 token stream used for training (see build_stream)
  valid_ids.npy       uint16 token stream of the held-out books (plain text only)
Run: python scripts/demo_model/prepare.py WORK_DIR
"""
import json
import os
import random
import re
import subprocess
import sys

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# Held-out books (about 5% of the text): Ruth, Esther, Ecclesiastes, Joel, Jonah, Mark,
# Philippians, James, 1 Peter -- names as the `bible -f` references print them.
HELD_OUT = {"Ruth", "Est", "Eccl", "Joel", "Jonah", "Mark", "Phi", "Jas", "1Pet"}
VOCAB_SIZE = 4096
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# The Qwen2 pre-tokenizer regex (as in Qwen2's tokenizer.json and llama.cpp's "qwen2" pre type).
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_FRACTION = 0.15  # share of verse pairs that also appear as a ChatML exchange
SEED = 20240611


def read_bible():
    """Returns [(book, chapter, verse, text)] for all 31102 verses, in canonical order."""
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True, capture_output=True,
                         text=True).stdout
    verses = []
    for line in out.splitlines():
        m = re.match(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$", line)
        if not m:
            raise SystemExit(f"unexpected line from bible: {line!r}")
        verses.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4).strip()))
    if len(verses) != 31102:
        raise SystemExit(f"expected 31102 verses, got {len(verses)}")
    return verses


def chapters(verses):
    """Groups verses into [(book, chapter, [texts])] keeping order."""
    out = []
    for book, ch, _, text in verses:
        if not out or out[-1][0] != book or out[-1][1] != ch:
            out.append((book, ch, []))
        out[-1][2].append(text)
    return out


def make_tokenizer(train_text_path):
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    # Special tokens are added after training so they take the last ids, as in Qwen2.
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS), min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[], show_progress=False)
    tok.train([train_text_path], trainer)
    tok.add_special_tokens(SPECIAL_TOKENS)
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    return tok


def chat_text(user, reply):
    return (f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{reply}<|im_end|>\n")


def build_stream(tok, chaps, rng):
    """Token stream: every chapter (verses joined by newlines) as its own document, plus a ChatML
    exchange (user: a verse, assistant: the verse after it) for CHAT_FRACTION of verse pairs;
    documents shuffled and each followed by <|endoftext|>."""
    eot = tok.token_to_id("<|endoftext|>")
    docs = ["\n".join(texts) + "\n" for _, _, texts in chaps]
    for _, _, texts in chaps:
        for a, b in zip(texts, texts[1:]):
            if rng.random() < CHAT_FRACTION:
                docs.append(chat_text(a, b))
    rng.shuffle(docs)
    ids = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eot)
    return np.array(ids, dtype=np.uint16), len(docs)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    verses = read_bible()
    with open(os.path.join(work, "kjv_verses.tsv"), "w", encoding="utf-8") as f:
        for b, c, v, t in verses:
            f.write(f"{b}\t{c}\t{v}\t{t}\n")
    chaps = chapters(verses)
    train = [c for c in chaps if c[0] not in HELD_OUT]
    valid = [c for c in chaps if c[0] in HELD_OUT]
    for name, part in (("train", train), ("valid", valid)):
        with open(os.path.join(work, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join("\n".join(t) + "\n" for _, _, t in part))
    tok = make_tokenizer(os.path.join(work, "train.txt"))
    tok.save(os.path.join(work, "tokenizer.json"))
    rng = random.Random(SEED)
    train_ids, n_docs = build_stream(tok, train, rng)
    np.save(os.path.join(work, "train_ids.npy"), train_ids)
    eot = tok.token_to_id("<|endoftext|>")
    valid_ids = []
    for enc in tok.encode_batch(["\n".join(t) + "\n" for _, _, t in valid],
                                add_special_tokens=False):
        valid_ids.extend(enc.ids)
        valid_ids.append(eot)
    np.save(os.path.join(work, "valid_ids.npy"), np.array(valid_ids, dtype=np.uint16))
    n_train_chars = sum(len(t) + 1 for c in train for t in c[2])
    n_valid_chars = sum(len(t) + 1 for c in valid for t in c[2])
    stats = {
        "verses": len(verses), "chapters": len(chaps),
        "train_chapters": len(train), "valid_chapters": len(valid),
        "train_chars": n_train_chars, "valid_chars": n_valid_chars,
        "valid_fraction_chars": round(n_valid_chars / (n_train_chars + n_valid_chars), 4),
        "held_out_books": sorted(HELD_OUT), "train_docs_incl_chat": n_docs,
        "train_stream_tokens": int(len(train_ids)), "valid_tokens": len(valid_ids),
        "vocab_size": tok.get_vocab_size(),
    }
    with open(os.path.join(work, "prepare_stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
