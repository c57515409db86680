#!/usr/bin/env python3
"""The PyTorch peer of bench/gpu_bench.cc on the GPU: the same reference
model (V 8192, T 512, L 8, H 8, C 512; batch 16) for the two presets, built
the way a careful PyTorch user would train it fast:

  gpt2    pre-norm LayerNorm, GELU (tanh), learned positions, biases
  modern  RMSNorm, SwiGLU (hidden 8C/3 rounded up to 8), RoPE, no biases

both with the output head tied to the token embedding, causal
F.scaled_dot_product_attention (flash kernels), bf16 autocast over f32 master
weights, torch.compile, fused AdamW (weight decay 0.1, betas 0.9/0.95) and
gradient clipping at norm 1, on random tokens. Prints one JSON line per
preset, as soon as it is measured:

  {"impl":"pytorch 2.11.0","arch":"gpt2","precision":"bf16-autocast",
   "compiled":true,"params":29676544,"tokens_per_s":…,"ms_per_step":…,
   "mfu":…,"compile_s":…,"loss":…}

MFU uses the engine's count, 6N + 6·L·C·T FLOPs per token, against the
dense bf16 peak (989 TFLOP/s) on H100/H200. Not a dependency of the project:
it runs where PyTorch with CUDA is installed (the GPU machine), from
scripts/gpu-check.

  python3 bench/torch_gpu_peer.py [--arch gpt2,modern] [--steps 20]
      [--warmup 3] [--batch 16] [--no-compile]
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PEAK_FLOPS = {"H100": 989e12, "H200": 989e12}


def swiglu_hidden(c):
    # ModelConfig::ff_hidden: 8C/3 rounded up, then up to a multiple of 8.
    return ((8 * c + 2) // 3 + 7) // 8 * 8


class RmsNorm(nn.Module):
    def __init__(self, c, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(c))

    def forward(self, x):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.gain).type_as(x)


def rope_tables(context, head_dim, device):
    # Pair i of a head at position m rotates by m·10000^(−2i/D).
    inv = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(context, dtype=torch.float64)[:, None] * inv[None, :]
    return angles.cos().float().to(device), angles.sin().float().to(device)


def rotate(x, cos, sin):
    # x (B, H, T, D): adjacent channels (2i, 2i+1) form pair i.
    t = x.shape[-2]
    pairs = x.float().unflatten(-1, (-1, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    c, s = cos[:t], sin[:t]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2).type_as(x)


class Block(nn.Module):
    def __init__(self, c, heads, modern):
        super().__init__()
        self.heads = heads
        self.modern = modern
        bias = not modern
        norm = (lambda: RmsNorm(c)) if modern else (lambda: nn.LayerNorm(c))
        self.ln1 = norm()
        self.qkv = nn.Linear(c, 3 * c, bias=bias)
        self.proj = nn.Linear(c, c, bias=bias)
        self.ln2 = norm()
        hidden = swiglu_hidden(c) if modern else 4 * c
        self.up = nn.Linear(c, hidden, bias=bias)
        self.gate = nn.Linear(c, hidden, bias=bias) if modern else None
        self.down = nn.Linear(hidden, c, bias=bias)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        if self.modern:
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        h = self.ln2(x)
        if self.modern:
            f = F.silu(self.gate(h)) * self.up(h)
        else:
            f = F.gelu(self.up(h), approximate="tanh")
        return x + self.down(f)


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, heads, embed, modern, device):
        super().__init__()
        self.modern = modern
        self.embed = nn.Embedding(vocab, embed)
        self.pos = None if modern else nn.Embedding(context, embed)
        self.blocks = nn.ModuleList(Block(embed, heads, modern) for _ in range(layers))
        self.final = RmsNorm(embed) if modern else nn.LayerNorm(embed)
        cos, sin = rope_tables(context, embed // heads, device)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        # GPT-2 initialization, as Model::Initialize.
        residual = 0.02 / math.sqrt(2 * layers)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = residual if name.endswith(("proj.weight", "down.weight")) else 0.02
                nn.init.normal_(p, std=0.01 if name.startswith("pos") else std)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.embed(idx)
        if self.pos is not None:
            x = x + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = self.final(x) @ self.embed.weight.t()  # tied head
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def peak_flops():
    name = torch.cuda.get_device_name()
    for key, value in PEAK_FLOPS.items():
        if key in name:
            return value
    return 0.0


def run(arch, a, compile_model, device="cuda"):
    torch.manual_seed(1)
    model = Gpt(a.vocab, a.context, a.layers, a.heads, a.embed, arch == "modern", device).to(device)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.95), fused=True)
    step_fn = torch.compile(model) if compile_model else model

    def step():
        idx = torch.randint(a.vocab, (a.batch, a.context), device=device)
        tgt = torch.randint(a.vocab, (a.batch, a.context), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.perf_counter()
    for _ in range(a.warmup):  # the first step compiles
        loss = step()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens_per_s = a.steps * a.batch * a.context / seconds
    flops_per_token = 6.0 * params + 6.0 * a.layers * a.embed * a.context
    peak = peak_flops()
    return {
        "impl": "pytorch " + torch.__version__,
        "device": torch.cuda.get_device_name(),
        "arch": arch,
        "precision": "bf16-autocast",
        "compiled": compile_model,
        "params": params,
        "batch": a.batch,
        "context": a.context,
        "steps": a.steps,
        "tokens_per_s": round(tokens_per_s, 1),
        "ms_per_step": round(1000 * seconds / a.steps, 3),
        "flops_per_token": flops_per_token,
        "mfu": round(tokens_per_s * flops_per_token / peak, 4) if peak else None,
        "compile_s": round(compile_s, 1),
        "loss": round(loss.item(), 4),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", default="gpt2,modern")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--embed", type=int, default=512)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-compile", action="store_true", help="eager mode only")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"impl": "pytorch " + torch.__version__, "error": "no CUDA device"}))
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    status = 0
    for arch in a.arch.split(","):
        if arch not in ("gpt2", "modern"):
            print(f"torch_gpu_peer: unknown --arch {arch!r} (expected gpt2 or modern)",
                  file=sys.stderr)
            return 2
        line, compile_error = None, None
        if not a.no_compile:
            try:
                line = run(arch, a, True)
            except Exception as e:  # a compile failure: measure eager instead
                compile_error = f"{type(e).__name__}: {e}"[:300]
                torch._dynamo.reset()
        if line is None:
            try:
                line = run(arch, a, False)
            except Exception as e:
                line = {"impl": "pytorch " + torch.__version__, "arch": arch,
                        "error": f"{type(e).__name__}: {e}"[:300]}
                status = 1
        if compile_error:
            line["compile_error"] = compile_error
        print(json.dumps(line), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
