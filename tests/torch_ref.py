"""torch_ref.py: the reference model of lib/model.h written again in PyTorch (float64), fed
the weights and batch that `test_model --dump FILE [--moe] [--flat] [--std S]` wrote, and
compared with the C model: the forward (loss, cross-entropy, aux loss: relative error; logits:
relative L2) within TOL_FWD, float32 noise against a float64 reference, and every parameter
gradient (relative L2) within TOL_GRAD, which leaves room for the float32 sums of a backward.

    /usr/bin/python3 tests/torch_ref.py DUMP...

Prints "skipped: python3-torch not installed" and exits 0 when torch cannot be imported.
The dump format is described at the top of tests/test_model.c."""
import math
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("skipped: python3-torch not installed")
    sys.exit(0)

TOL_FWD = 2e-6
TOL_GRAD = 5e-5
MAGIC = b"PLMODEL1"


class Reader:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.buf):
            sys.exit(f"{self.path_hint}: truncated dump")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def ints(self, n):
        return list(struct.unpack(f"<{n}i", self.take(4 * n)))

    def tensor(self, fmt, shape):
        n = math.prod(shape)
        size = struct.calcsize(fmt)
        vals = struct.unpack(f"<{n}{fmt}", self.take(size * n))
        return torch.tensor(vals, dtype=torch.float64).reshape(shape)


def load(path):
    r = Reader(path)
    r.path_hint = path
    if r.take(8) != MAGIC:
        sys.exit(f"{path}: not a model dump (magic is not {MAGIC!r})")
    version, V, C, L, NH, FF, T, E, K, B = r.ints(10)
    if version != 1:
        sys.exit(f"{path}: dump version {version}, this script reads version 1")
    cf, aux_coef = struct.unpack("<2f", r.take(8))
    (nt,) = r.ints(1)
    params, grads = {}, {}
    for _ in range(nt):
        name = r.take(64).split(b"\0")[0].decode()
        ndim, *shape = r.ints(5)
        shape = shape[:ndim]
        params[name] = r.tensor("f", shape)
        grads[name] = r.tensor("f", shape)
    tokens = torch.tensor(r.ints(B * T)).reshape(B, T)
    targets = torch.tensor(r.ints(B * T)).reshape(B, T)
    loss, loss_ce, loss_aux = struct.unpack("<3d", r.take(24))
    logits = r.tensor("f", [B * T, V])
    cfg = dict(V=V, C=C, L=L, NH=NH, FF=FF, T=T, E=E, K=K, B=B, cf=cf, aux_coef=aux_coef)
    return cfg, params, grads, tokens, targets, (loss, loss_ce, loss_aux), logits


def attention(h, w_qkv, b_qkv, NH):
    B, T, C = h.shape
    qkv = h @ w_qkv.T + b_qkv
    q, k, v = qkv.split(C, dim=2)
    hs = C // NH
    q, k, v = (t.reshape(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


def gelu(x):
    return F.gelu(x, approximate="tanh")


def moe(h, p, pre, cfg):
    """The routing rules of model.h: top-k by probability (ties to the lower index), slots
    filled choice by choice in token order up to the capacity, gates not renormalised,
    aux = a E sum_i f_i P_i with f held constant."""
    B, T, C = h.shape
    N, E, K = B * T, cfg["E"], cfg["K"]
    x = h.reshape(N, C)
    probs = (x @ p[pre + "w_router"].T).softmax(dim=-1)
    pd = probs.detach()
    choice = []
    for t in range(N):
        order = sorted(range(E), key=lambda e: (-pd[t, e].item(), e))
        choice.append(order[:K])
    want = cfg["cf"] * N * K / E  # pl_moe_capacity: the ceiling, at least 1
    cap = max(1, int(want) + (int(want) < want))
    count = [0] * E
    dropped = 0
    out = torch.zeros_like(x)
    for j in range(K):
        for t in range(N):
            e = choice[t][j]
            if count[e] >= cap:
                dropped += 1
                continue
            count[e] += 1
            hid = gelu(x[t] @ p[pre + "w_fc"][e].T + p[pre + "b_fc"][e])
            y = hid @ p[pre + "w_proj"][e].T + p[pre + "b_proj"][e]
            out = out.index_add(0, torch.tensor([t]), (probs[t, e] * y).unsqueeze(0))
    f = torch.zeros(E, dtype=torch.float64)
    for t in range(N):
        for e in choice[t]:
            f[e] += 1.0 / (N * K)
    aux = cfg["aux_coef"] * E * (f * probs.mean(dim=0)).sum()
    return out.reshape(B, T, C), aux, dropped


def forward(cfg, p, tokens, targets):
    B, T = tokens.shape
    x = p["wte"][tokens] + p["wpe"][:T]
    aux_total = torch.zeros((), dtype=torch.float64)
    for l in range(cfg["L"]):
        pre = f"h.{l}."
        h = F.layer_norm(x, (cfg["C"],), p[pre + "ln1.w"], p[pre + "ln1.b"], eps=1e-5)
        y = attention(h, p[pre + "attn.w_qkv"], p[pre + "attn.b_qkv"], cfg["NH"])
        x = x + y @ p[pre + "attn.w_proj"].T + p[pre + "attn.b_proj"]
        h = F.layer_norm(x, (cfg["C"],), p[pre + "ln2.w"], p[pre + "ln2.b"], eps=1e-5)
        if cfg["E"] == 0:
            hid = gelu(h @ p[pre + "mlp.w_fc"].T + p[pre + "mlp.b_fc"])
            x = x + hid @ p[pre + "mlp.w_proj"].T + p[pre + "mlp.b_proj"]
        else:
            y, aux, dropped = moe(h, p, pre + "moe.", cfg)
            cfg["dropped"] = cfg.get("dropped", 0) + dropped
            x = x + y
            aux_total = aux_total + aux
    h = F.layer_norm(x, (cfg["C"],), p["lnf.w"], p["lnf.b"], eps=1e-5)
    logits = (h @ p["head.w"].T).reshape(B * T, cfg["V"])
    ce = F.cross_entropy(logits, targets.reshape(-1))
    return ce + aux_total, ce, aux_total, logits


def rel_l2(got, want):
    return (got - want).norm().item() / max(want.norm().item(), 1e-30)


def check(path):
    cfg, params, grads, tokens, targets, losses, logits_c = load(path)
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    loss, ce, aux, logits = forward(cfg, p, tokens, targets)
    loss.backward()
    kind = "MoE" if cfg["E"] else "dense"
    failures = []
    fwd = 0.0
    for what, got, want in (("loss", losses[0], loss.item()), ("cross-entropy", losses[1], ce.item()),
                            ("aux loss", losses[2], aux.item())):
        err = abs(got - want) / max(abs(want), 1e-30) if want else abs(got)
        if err > TOL_FWD:
            failures.append(f"{what}: C {got:.9g}, PyTorch {want:.9g} (rel {err:.2e})")
        fwd = max(fwd, err)
    err = rel_l2(logits_c, logits.detach())
    fwd = max(fwd, err)
    if err > TOL_FWD:
        failures.append(f"logits: rel L2 {err:.2e}")
    worst = 0.0
    for name, g in grads.items():
        if p[name].grad is None:
            failures.append(f"{name}: PyTorch computed no gradient")
            continue
        err = rel_l2(g, p[name].grad)
        worst = max(worst, err)
        if err > TOL_GRAD:
            failures.append(f"gradient of {name}: rel L2 {err:.2e} vs PyTorch")
    for f in failures:
        print(f"FAIL {path} ({kind}): {f}")
    if not failures:
        if cfg["E"]:
            kind += f" ({cfg['dropped']} choices dropped for capacity)"
        print(f"ok {kind} ({path.rsplit('/', 1)[-1]}): loss {loss.item():.6f}, logits and "
              f"{len(grads)} gradients match PyTorch {torch.__version__} (worst forward rel "
              f"{fwd:.1e}, limit {TOL_FWD:g}; worst gradient rel L2 {worst:.1e}, limit "
              f"{TOL_GRAD:g})")
    return not failures


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: torch_ref.py DUMP... (dumps from test_model --dump FILE [--moe])")
    torch.set_default_dtype(torch.float64)
    ok = all([check(path) for path in sys.argv[1:]])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
