"""The reference GPT of trainer/ written in PyTorch, to time a training step against strata-gpt.

Same architecture (GPT-2: token + position embeddings, pre-LayerNorm blocks with causal
multi-head attention and a tanh-GELU MLP, final LayerNorm, head tied to the token embedding),
same AdamW settings, the same bundled corpus and batch shape, one thread. Prints one JSON line:
{"tokens_per_s": ..., "step_ms": ..., "params": ..., "loss_first": ..., "loss_last": ...}.

    python3 benchmarks/gpt_torch.py --layers 6 --heads 6 --embd 192 --ctx 128 --batch 16 --steps 10
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c)
        self.attn = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fcproj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn(self.ln1(x)).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, ctx, layers, heads, c):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(ctx, c)
        self.blocks = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(c)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if "proj" in name else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data/tinyshakespeare.txt")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--embd", type=int, default=192)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    text = open(a.data, "rb").read()
    chars = sorted(set(text))
    ids = torch.tensor([chars.index(ch) for ch in text[:200000]], dtype=torch.long)
    model = Gpt(len(chars), a.ctx, a.layers, a.heads, a.embd)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(7)
    losses, times = [], []
    for step in range(a.steps + 1):  # step 0 warms up
        starts = torch.randint(0, len(ids) - a.ctx - 1, (a.batch,), generator=g)
        x = torch.stack([ids[s:s + a.ctx] for s in starts])
        y = torch.stack([ids[s + 1:s + a.ctx + 1] for s in starts])
        t0 = time.perf_counter()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        losses.append(loss.item())
        if step:
            times.append(dt)
    step_s = sorted(times)[len(times) // 2]  # median
    print(json.dumps({"tokens_per_s": a.batch * a.ctx / step_s, "step_ms": 1e3 * step_s,
                      "params": sum(p.numel() for p in model.parameters()),
                      "loss_first": losses[0], "loss_last": losses[-1],
                      "torch": torch.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
