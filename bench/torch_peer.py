#!/usr/bin/env python3
"""The PyTorch peer of bench/train_bench.cc: the same model — GPT-2 (pre-norm
LayerNorm, GELU-tanh, learned positions, biases) or modern (RMSNorm, SwiGLU
with 8C/3 hidden channels rounded up to 8, RoPE on adjacent pairs, no
biases), tied head — the same batch, AdamW with clipping, random tokens, at
the given thread count. Prints one JSON line.

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


class RmsNorm(nn.Module):
    def __init__(self, c, eps=1e-5):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(c))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.gain


def rope_tables(t, d):
    """cos and sin of m·10000^(−2i/D), shape (T, D/2)."""
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    return angles.cos().float(), angles.sin().float()


def rotate_pairs(x, cos, sin):
    """Rotates adjacent channel pairs (x[2i], x[2i+1]) of (B, H, T, D) by θ."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, c, h, modern):
        super().__init__()
        self.h = h
        self.modern = modern
        bias = not modern
        norm = RmsNorm if modern else nn.LayerNorm
        hidden = ((8 * c + 2) // 3 + 7) // 8 * 8 if modern else 4 * c
        self.ln1 = norm(c)
        self.qkv = nn.Linear(c, 3 * c, bias=bias)
        self.proj = nn.Linear(c, c, bias=bias)
        self.ln2 = norm(c)
        self.up = nn.Linear(c, hidden, bias=bias)
        if modern:
            self.gate = nn.Linear(c, hidden, bias=bias)
        self.down = nn.Linear(hidden, c, bias=bias)

    def forward(self, x, rope):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        shape = (b, t, self.h, c // self.h)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        if self.modern:
            q, k = rotate_pairs(q, *rope), rotate_pairs(k, *rope)
        if hasattr(F, "scaled_dot_product_attention"):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0: the textbook masked softmax
            s = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            a = s.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        y = self.ln2(x)
        if self.modern:
            return x + self.down(F.silu(self.gate(y)) * self.up(y))
        return x + self.down(F.gelu(self.up(y), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, heads, embed, modern):
        super().__init__()
        self.modern = modern
        self.embed = nn.Embedding(vocab, embed)
        nn.init.normal_(self.embed.weight, std=0.02)  # as smallem: logits near 0
        if modern:
            self.rope = rope_tables(context, embed // heads)
        else:
            self.pos = nn.Embedding(context, embed)
        self.blocks = nn.ModuleList(Block(embed, heads, modern) for _ in range(layers))
        self.final = RmsNorm(embed) if modern else nn.LayerNorm(embed)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.embed(idx)
        rope = None
        if self.modern:
            rope = (self.rope[0][:t], self.rope[1][:t])
        else:
            x = x + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x, rope)
        logits = self.final(x) @ self.embed.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", choices=("gpt2", "modern"), default="gpt2")
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
    model = Gpt(a.vocab, a.context, a.layers, a.heads, a.embed, a.arch == "modern")
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
    print(json.dumps({"impl": "pytorch " + torch.__version__, "arch": a.arch, "vocab": a.vocab,
                      "threads": torch.get_num_threads(), "params": params,
                      "tokens_per_s": round(tps, 1),
                      "ms_per_step": round(1000 * seconds / a.steps, 2),
                      "loss": round(loss_value, 4)}))


if __name__ == "__main__":
    main()
