"""bench_train.py: the model of lib/model.h written as an ordinary fp32 PyTorch module and
stepped on the CPU or a GPU, for bench_train's comparison of training throughput in the same
run.

    python3 tests/bench_train.py --data FILE --threads N --d-model C --layers L
        --heads H --d-ff F --seq-len T --batch B [--experts E --top-k K
        --capacity-factor CF --aux-coef A] [--seconds S] [--device cuda]

--device cuda (the GPU build's `make bench-model GPU=1`) steps the model on the GPU twice:
in fp32 with TF32 off (the kit's math: every matmul in full fp32), and, for reference, the
way a PyTorch user trains: bf16 autocast with the fused attention kernel
(scaled_dot_product_attention, causal). Each timing ends with torch.cuda.synchronize(). It
prints the fp32 line, then the same line starting "torch-bf16" (cpu_ms/step is then the
host's time, not the GPU's). Exits 3 when torch cannot be imported or sees no GPU.

Same architecture as the C reference: pre-layernorm GPT-2 blocks, untied head without bias,
tanh GELU, AdamW (betas 0.9/0.95, eps 1e-8, decay 0.1 on matrices), gradient clipping at
1.0; the MoE variant routes top-k with a capacity (choice-major slot filling, as model.h)
and runs the experts as batched matmuls, the usual efficient way. Reads batches from a
paralab token file. Prints one line: "torch tok/s X ms/step Y params Z threads N
cpu_ms/step U", U the main thread's CPU time per step (all of it at one thread: on a shared
machine it leaves out the time other programs held the core).
Exits 3 with a message when torch cannot be imported."""
import argparse
import math
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("skipped: python3-torch not installed")
    sys.exit(3)


def read_tokens(path):
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != b"PLTOKENS":
        sys.exit(f"{path}: not a paralab token file")
    n = int.from_bytes(buf[24:32], "little")
    return torch.frombuffer(bytearray(buf[64:64 + 2 * n]), dtype=torch.int16).to(torch.int64) & 0xFFFF


FUSED_ATTENTION = False  # set for the bf16 reference run on a GPU


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        C, Fh = a.d_model, a.d_ff
        self.nh = a.heads
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.E, self.K, self.cf, self.aux_coef = a.experts, a.top_k, a.capacity_factor, a.aux_coef
        if self.E == 0:
            self.fc = nn.Linear(C, Fh)
            self.fc2 = nn.Linear(Fh, C)
        else:
            E = self.E
            self.router = nn.Linear(C, E, bias=False)
            self.w_fc = nn.Parameter(torch.randn(E, Fh, C) * 0.02)
            self.b_fc = nn.Parameter(torch.zeros(E, Fh))
            self.w_proj = nn.Parameter(torch.randn(E, C, Fh) * 0.02)
            self.b_proj = nn.Parameter(torch.zeros(E, C))
        mask = torch.ones(a.seq_len, a.seq_len, dtype=torch.bool).tril()
        self.register_buffer("mask", mask, persistent=False)

    def attn(self, h):
        B, T, C = h.shape
        q, k, v = self.qkv(h).split(C, dim=2)
        hs = C // self.nh
        q, k, v = (t.view(B, T, self.nh, hs).transpose(1, 2) for t in (q, k, v))
        if FUSED_ATTENTION:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))

    def moe(self, h):
        B, T, C = h.shape
        N, E, K = B * T, self.E, self.K
        x = h.reshape(N, C)
        probs = self.router(x).softmax(dim=-1)
        gate, expert = probs.topk(K, dim=-1)
        cap = max(1, math.ceil(self.cf * N * K / E))
        flat_e = expert.t().reshape(-1)  # choice-major: all first choices, then second...
        pos = (F.one_hot(flat_e, E).cumsum(0) - 1).gather(1, flat_e[:, None]).squeeze(1)
        keep = pos < cap
        tok = torch.arange(N, device=x.device).repeat(K)[keep]
        slot = (flat_e * cap + pos)[keep]
        g = gate.t().reshape(-1)[keep]
        xe = x.new_zeros(E * cap, C).index_copy(0, slot, x[tok]).view(E, cap, C)
        he = F.gelu(torch.baddbmm(self.b_fc[:, None, :], xe, self.w_fc.transpose(1, 2)),
                    approximate="tanh")
        ye = torch.baddbmm(self.b_proj[:, None, :], he, self.w_proj.transpose(1, 2))
        out = x.new_zeros(N, C).index_add(0, tok, ye.view(E * cap, C)[slot] * g[:, None])
        f = torch.bincount(flat_e, minlength=E).to(x.dtype) / (N * K)
        aux = self.aux_coef * E * (f * probs.mean(dim=0)).sum()
        return out.view(B, T, C), aux

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        h = self.ln2(x)
        if self.E == 0:
            return x + self.fc2(F.gelu(self.fc(h), approximate="tanh")), 0.0
        y, aux = self.moe(h)
        return x + y, aux


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.d_model)
        self.wpe = nn.Embedding(a.seq_len, a.d_model)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.lnf = nn.LayerNorm(a.d_model, eps=1e-5)
        self.head = nn.Linear(a.d_model, a.vocab, bias=False)
        for name, p in self.named_parameters():
            if p.dim() >= 2 and "w_fc" not in name and "w_proj" not in name:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets):
        B, T = tokens.shape
        x = self.wte(tokens) + self.wpe.weight[:T]
        aux = 0.0
        for b in self.blocks:
            x, a = b(x)
            aux = aux + a
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(B * T, -1), targets.reshape(-1)) + aux


def main():
    p = argparse.ArgumentParser()
    for name, typ, default in [("data", str, None), ("threads", int, 1), ("vocab", int, 256),
                               ("d-model", int, 64), ("layers", int, 2), ("heads", int, 4),
                               ("d-ff", int, 256), ("seq-len", int, 64), ("batch", int, 8),
                               ("experts", int, 0), ("top-k", int, 2),
                               ("capacity-factor", float, 1.25), ("aux-coef", float, 0.01),
                               ("seconds", float, 2.0), ("warmup", int, 3),
                               ("device", str, "cpu")]:
        p.add_argument("--" + name, type=typ, default=default)
    a = p.parse_args()
    if a.device not in ("cpu", "cuda"):
        sys.exit(f"--device {a.device}: expected cpu or cuda")
    if a.device == "cuda" and not torch.cuda.is_available():
        print("skipped: torch sees no GPU (torch.cuda.is_available() is False)")
        sys.exit(3)
    torch.set_num_threads(a.threads)
    data = read_tokens(a.data)
    if a.device == "cpu":
        run(a, data, "torch", bf16=False)
    else:
        torch.backends.cuda.matmul.allow_tf32 = False  # the kit's math: fp32 matmuls
        torch.backends.cudnn.allow_tf32 = False
        run(a, data, "torch", bf16=False)
        if not hasattr(F, "scaled_dot_product_attention"):
            print(f"torch {torch.__version__} has no scaled_dot_product_attention (torch 2.0 "
                  "or newer): no bf16 reference run")
            return
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        run(a, data, "torch-bf16", bf16=True)


def run(a, data, label, bf16):
    global FUSED_ATTENTION
    FUSED_ATTENTION = bf16
    dev = torch.device(a.device)
    torch.manual_seed(1234)
    model = GPT(a).to(dev)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    if a.experts:  # stacked expert biases are per-expert vectors: not decayed, as model.c
        decay = [q for n, q in model.named_parameters() if q.dim() >= 2 and "b_" not in n]
        no_decay = [q for n, q in model.named_parameters() if q.dim() < 2 or "b_" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    B, T = a.batch, a.seq_len
    windows = (len(data) - 1) // T
    gen = torch.Generator().manual_seed(1)
    cuda = dev.type == "cuda"

    def step():
        w = torch.randint(windows, (B,), generator=gen) * T
        idx = w[:, None] + torch.arange(T + 1)[None, :]
        chunk = data[idx].to(dev, non_blocking=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(chunk[:, :-1], chunk[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()  # waits for the step (the kit's step also returns its loss)

    for _ in range(a.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    n, t0, c0 = 0, time.perf_counter(), time.thread_time()
    while n < 5 or time.perf_counter() - t0 < a.seconds:
        step()
        n += 1
    if cuda:
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / n
    cpu = (time.thread_time() - c0) / n
    params = sum(q.numel() for q in model.parameters())
    print(f"{label} tok/s {B * T / dt:.1f} ms/step {dt * 1e3:.3f} params {params} "
          f"threads {torch.get_num_threads()} cpu_ms/step {cpu * 1e3:.3f}", flush=True)
    del model, opt
    if cuda:
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
