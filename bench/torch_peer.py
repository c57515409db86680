#!/usr/bin/env python3
"""The PyTorch peer of bench/train_bench.cc: the same GPT-2-style model
(pre-norm LayerNorm, GELU-tanh, learned positions, tied head, biases), the
same batch, AdamW, the same thread count, random tokens. Prints one JSON line.

Not a dependency of the project: Debian's python3-torch, run with
/usr/bin/python3 (scripts/setup installs it when SMALLEM_BENCH_PEERS=1).
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.up = nn.Linear(c, 4 * c)
        self.down = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        shape = (b, t, self.h, c // self.h)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0: the textbook masked softmax
            s = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            a = s.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, heads, embed):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.pos = nn.Embedding(context, embed)
        self.blocks = nn.ModuleList(Block(embed, heads) for _ in range(layers))
        self.final = nn.LayerNorm(embed)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.embed(idx) + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x)
        logits = self.final(x) @ self.embed.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--embed", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = Gpt(a.vocab, a.context, a.layers, a.heads, a.embed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    params = sum(p.numel() for p in model.parameters())
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            start = time.perf_counter()
        idx = torch.randint(a.vocab, (a.batch, a.context))
        tgt = torch.randint(a.vocab, (a.batch, a.context))
        loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = loss.item()
    seconds = time.perf_counter() - start
    tps = a.steps * a.batch * a.context / seconds
    print(json.dumps({"impl": "pytorch " + torch.__version__, "vocab": a.vocab,
                      "threads": torch.get_num_threads(), "params": params,
                      "tokens_per_s": round(tps, 1),
                      "ms_per_step": round(1000 * seconds / a.steps, 2),
                      "loss": round(loss_value, 4)}))


if __name__ == "__main__":
    main()
