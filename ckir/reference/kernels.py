"""NumPy reference functions of the runtime kernels: one per kernel kind (``op`` of the
registry), float64 arithmetic, float32 where the C kernel rounds on purpose.

Two layers:

- oracles with plain NumPy arguments (:func:`attention_oracle`, :func:`rope_oracle`,
  :func:`rmsnorm_fwd`, :func:`gelu_tanh`, :func:`silu_mul`, ...), which the kernel tests
  compare the C kernels against;
- :data:`REFERENCE`: kind -> function of a call's operands and parameters, the form the
  plan interpreter (:mod:`ckir.interp`) runs.  Each takes ``ops`` (operand name -> flat
  array: float64 values for float operands, weights already dequantized, int32 for
  token ids) and ``p`` (parameter name -> number, run-time values resolved) and returns
  the written operands (name -> flat array of the elements its extent covers, from the
  start of the buffer).  Operand and parameter names are the registry's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

F32 = np.float32
F64 = np.float64

Operands = Mapping[str, np.ndarray]
Params = Mapping[str, int | float | tuple[float, ...]]
Outputs = dict[str, np.ndarray]


# ----------------------------------------------------------------------------- oracles


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2's gelu_new)."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt 2)) (transformers' gelu), as x erfc(-x / sqrt 2) / 2."""
    return 0.5 * x * _ERFC(-x / math.sqrt(2.0))


def gelu_erf_grad(x: np.ndarray) -> np.ndarray:
    """d/dx of :func:`gelu_erf`: Phi(x) + x phi(x)."""
    return 0.5 * _ERFC(-x / math.sqrt(2.0)) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def silu_mul(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """silu(g) * u = g / (1 + e^-g) * u (SwiGLU)."""
    return g / (1.0 + np.exp(-g)) * u


def rmsnorm_fwd(x: np.ndarray, gamma: np.ndarray, eps: float, offset: float) -> np.ndarray:
    """Row-wise x * rsqrt(mean(x^2) + eps) * (gamma + offset) of a [T, E] ``x``."""
    return x / np.sqrt((x**2).mean(axis=1, keepdims=True) + eps) * (gamma + offset)


def attention_oracle(
    q: np.ndarray,
    kc: np.ndarray,
    vc: np.ndarray,
    T: int,
    P: int,
    H: int,
    KV: int,
    D: int,
    scale: float,
    softcap: float,
    window: int,
) -> np.ndarray:
    """Causal GQA attention in float64 of q [T, H*D] over cache rows
    max(0, pos - window + 1) .. pos, pos = P + t (window 0: from row 0); scores
    ``scale * q.k``, soft-capped ``softcap * tanh(s / softcap)`` when softcap > 0."""
    q, kc, vc = (np.asarray(a, F64) for a in (q, kc, vc))
    out = np.zeros((T, H * D))
    group = H // KV
    for t in range(T):
        pos = P + t
        j0 = max(0, pos - window + 1) if window else 0
        for h in range(H):
            g = h // group
            k = kc[j0 : pos + 1, g * D : (g + 1) * D]
            v = vc[j0 : pos + 1, g * D : (g + 1) * D]
            s = scale * (k @ q[t, h * D : (h + 1) * D])
            if softcap:
                s = softcap * np.tanh(s / softcap)
            e = np.exp(s - s.max())
            out[t, h * D : (h + 1) * D] = (e / e.sum()) @ v
    return out


def attention_bias_oracle(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray,
    p: Mapping[str, int | float],
) -> tuple[np.ndarray, np.ndarray]:
    """``attention_bias_f32`` in float64: (out [T, H*Dv], scores [H, T, S] of ``mode``).

    q [T, H*D], k [S, KV*D], v [S, KV*Dv], bias [H, T, S]; the mask adds -inf where
    ``causal`` and j > i + P, and outside a ``left`` / ``right`` window (-1: none) of
    i + P; a row whose bias is -inf everywhere gives out 0 and probabilities 0 (ONNX)."""
    T, S, H, KV, D, Dv, P = (int(p[n]) for n in ("T", "S", "H", "KV", "D", "Dv", "P"))
    causal, left, right, mode = (int(p[n]) for n in ("causal", "left", "right", "mode"))
    scale, cap = float(p["scale"]), float(p["softcap"])
    q4 = np.asarray(q, F64).reshape(T, H, D).transpose(1, 0, 2)
    rep = H // KV
    k4 = np.repeat(np.asarray(k, F64).reshape(S, KV, D).transpose(1, 0, 2), rep, axis=0)
    v4 = np.repeat(np.asarray(v, F64).reshape(S, KV, Dv).transpose(1, 0, 2), rep, axis=0)
    s = scale * q4 @ k4.transpose(0, 2, 1)
    if cap > 0:
        s = cap * np.tanh(s / cap)
    diff = np.arange(T)[:, None] + P - np.arange(S)[None, :]
    allowed = np.ones((T, S), bool)
    if causal:
        allowed &= diff >= 0
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    b = np.where(allowed, np.asarray(bias, F64).reshape(H, T, S), -np.inf)
    z = s + b
    dead = np.isneginf(b.max(axis=-1, keepdims=True))
    m = np.where(np.isneginf(z.max(axis=-1, keepdims=True)), 0.0, z.max(axis=-1, keepdims=True))
    e = np.exp(z - m)
    total = e.sum(axis=-1, keepdims=True)
    prob = np.where(dead, 0.0, e / np.where(total == 0, 1.0, total))
    out = (prob @ v4).transpose(1, 0, 2).reshape(T, H * Dv)
    scores = {0: s, 1: s, 2: z, 3: prob}.get(mode, prob)
    return out, scores


def rope_inv_freq(
    R: int,
    theta: float,
    factor: float = 1.0,
    ramp: tuple[float, float, float] = (0.0, 0.0, 0.0),
    ext: Sequence[float] | None = None,
) -> np.ndarray:
    """ckir_rope.h's inverse frequencies in float32: b = theta^(-2i/R), m = clamp(ramp_w b +
    ramp_i i + ramp_0, 0, 1), b ((1 - m) / factor + m); with per-pair divisors ``ext``
    (R/2 of them) 1 / (ext[i] theta^(2i/R)) instead."""
    expo = np.arange(0, R, 2, dtype=F32) / F32(R)
    if ext is not None:
        e = np.asarray(ext, dtype=F32)
        p = np.array([F32(math.pow(float(theta), float(x))) for x in expo], F32)
        return (F32(1.0) / (e * p)).astype(F32)
    b = np.array([F32(1.0) / F32(math.pow(float(theta), float(e))) for e in expo], F32)
    if factor == 1.0:
        return b
    w, wi, w0 = (F32(v) for v in ramp)
    m = np.clip(w * b + wi * np.arange(len(b), dtype=F32) + w0, F32(0), F32(1)).astype(F32)
    return (b * ((F32(1) - m) / F32(factor) + m)).astype(F32)


def rope_oracle(
    x: np.ndarray,
    nheads: int,
    D: int,
    positions: range | list[int],
    theta: float,
    sign: float = 1.0,
    R: int | None = None,
    factor: float = 1.0,
    ramp: tuple[float, float, float] = (0.0, 0.0, 0.0),
    mscale: float = 1.0,
    ext: Sequence[float] | None = None,
) -> np.ndarray:
    """HF rotate_half over the first R dims of each head (the rest pass through), with
    float32 inv_freq and angle, float64 cos/sin and products, cos and sin scaled by
    mscale; ``sign=-1`` rotates by the opposite angle (rope's transpose: its backward);
    ``ext``: per-pair frequency divisors (:func:`rope_inv_freq`)."""
    R = D if R is None else R
    half = R // 2
    inv = rope_inv_freq(R, theta, factor, ramp, ext)
    out = x.astype(F64).reshape(len(positions), nheads, D).copy()
    for t, pos in enumerate(positions):
        ang = (F32(pos) * inv).astype(F64)
        c, s = mscale * np.cos(ang), sign * mscale * np.sin(ang)
        x1, x2 = out[t, :, :half].copy(), out[t, :, half:R].copy()
        out[t, :, :half] = x1 * c - x2 * s
        out[t, :, half:R] = x2 * c + x1 * s
    return out.reshape(x.shape)


def quantize_x(x: np.ndarray, block: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """The runtime's activation quantizer: a (int64 [blocks, block]), dx (fp32) per block
    of ``block`` (32: Q8_0 / Q4_0 / Q4_1 kernels; 256: K-quant kernels, Q8_K):
    ``dx = max|x_b| / 127``, ``a = rint(x / dx)`` in fp32 (0 where dx == 0)."""
    xb = x.reshape(-1, block).astype(F32)
    dx = (np.abs(xb).max(axis=1) / F32(127)).astype(F32)
    safe = np.where(dx == 0, F32(1), dx).astype(F32)
    a = np.where(dx[:, None] == 0, F32(0), np.rint(xb / safe[:, None])).astype(np.int64)
    return a, dx


def quantized_x(x: np.ndarray, block: int) -> np.ndarray:
    """x as the int8 GEMVs / GEMMs see it: each block quantized then scaled back
    (``dx * a``, float64); a row times dequantized weights is then the kernel's block
    sum ``d_w * d_x * (q . a) (+ m * d_x * sum a)`` in exact arithmetic."""
    a, dx = quantize_x(x, block)
    return (a * dx.astype(F64)[:, None]).reshape(x.shape)


def adamw_oracle(
    w: np.ndarray,
    g: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    lr: float,
    b1: float,
    b2: float,
    eps: float,
    wd: float,
    step: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """torch.optim.AdamW's update (amsgrad off), in float64 from the float32 hyperparameters
    the kernel receives (1 - f32(0.999) is 1e-5 off 1 - 0.999)."""
    w, g, m, v = (a.astype(F64) for a in (w, g, m, v))
    lr, b1, b2, eps, wd = (float(F32(h)) for h in (lr, b1, b2, eps, wd))
    w = w * (1.0 - lr * wd)
    m = b1 * m + (1.0 - b1) * g
    v = b2 * v + (1.0 - b2) * g * g
    bc1, bc2 = 1.0 - b1**step, 1.0 - b2**step
    w = w - (lr / bc1) * m / (np.sqrt(v) / np.sqrt(bc2) + eps)
    return w, m, v


def rmsnorm_bwd_oracle(
    x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """dx and dgamma of rmsnorm over the rows of x [T, E], float64."""
    x, gamma, dy = x.astype(F64), gamma.astype(F64), dy.astype(F64)
    E = x.shape[1]
    r = 1.0 / np.sqrt((x**2).mean(axis=1, keepdims=True) + eps)
    gd = gamma * dy
    dx = r * gd - x * r**3 / E * (gd * x).sum(axis=1, keepdims=True)
    dgamma = (dy * x * r).sum(axis=0)
    return dx, dgamma


def attention_bwd_oracle(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    out: np.ndarray,
    dout: np.ndarray,
    H: int,
    KV: int,
    D: int,
    scale: float | None = None,
    softcap: float = 0.0,
    window: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dq, dk, dv of causal GQA attention at P = 0 in float64 from the kernel's inputs
    (delta = dout . out uses ``out`` as given); ``scale`` (default 1/sqrt(D)), ``softcap``
    and ``window`` as :func:`attention_oracle`'s (attention_ext's backward)."""
    T, g = q.shape[0], H // KV
    q, out, dout = (a.astype(F64).reshape(T, H, D) for a in (q, out, dout))
    k, v = (a.astype(F64).reshape(T, KV, D) for a in (k, v))
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    rows, cols = np.indices((T, T))
    mask = (cols <= rows) & ((rows - cols < window) if window else True)
    dq, dk, dv = np.zeros((T, H, D)), np.zeros((T, KV, D)), np.zeros((T, KV, D))
    for h in range(H):
        j = h // g
        raw = q[:, h] @ k[:, j].T * scale
        capped = softcap * np.tanh(raw / softcap) if softcap else raw
        s = np.where(mask, capped, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        dp = dout[:, h] @ v[:, j].T
        ds = p * (dp - (dout[:, h] * out[:, h]).sum(axis=1, keepdims=True))
        if softcap:
            ds = ds * (1.0 - np.tanh(raw / softcap) ** 2)
        dq[:, h] = scale * ds @ k[:, j]
        dk[:, j] += scale * ds.T @ q[:, h]
        dv[:, j] += p.T @ dout[:, h]
    return dq.reshape(T, H * D), dk.reshape(T, KV * D), dv.reshape(T, KV * D)


def layernorm_bwd_oracle(
    x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dx, dgamma, dbeta of layernorm over the rows of x [T, E], float64."""
    x, gamma, dy = x.astype(F64), gamma.astype(F64), dy.astype(F64)
    mu = x.mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + eps)
    xh, g = (x - mu) * r, gamma * dy
    dx = r * (g - g.mean(axis=1, keepdims=True) - xh * (g * xh).mean(axis=1, keepdims=True))
    return dx, (dy * xh).sum(axis=0), dy.sum(axis=0)


def gelu_tanh_grad(x: np.ndarray) -> np.ndarray:
    """d/dx of :func:`gelu_tanh`."""
    c = np.sqrt(2.0 / np.pi)
    th = np.tanh(c * (x + 0.044715 * x**3))
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th**2) * c * (1.0 + 3 * 0.044715 * x**2)


# ------------------------------------------------------------- kinds, as the IR calls them


def _rows(a: np.ndarray, rows: int, cols: int) -> np.ndarray:
    return a[: rows * cols].reshape(rows, cols)


def _int(p: Params, name: str, default: int = 1) -> int:
    return int(p.get(name, default))


def _embed(ops: Operands, p: Params) -> Outputs:
    T, E = _int(p, "T"), _int(p, "E")
    table = ops["table"].reshape(-1, E)
    return {"out": table[ops["tokens"][:T]].reshape(-1)}


def _pos_embed(ops: Operands, p: Params) -> Outputs:
    T, E, P = _int(p, "T"), _int(p, "E"), _int(p, "P", 0)
    x = _rows(ops["x"], T, E) + _rows(ops["wpe"], P + T, E)[P:]
    return {"x": x.reshape(-1)}


def _rmsnorm(ops: Operands, p: Params) -> Outputs:
    T, E = _int(p, "T"), _int(p, "E")
    gamma = ops["gamma"][:E]
    offset = float(p.get("offset", 0.0))
    if offset:  # gamma + offset is formed in f32
        gamma = (gamma.astype(F32) + F32(offset)).astype(F64)
    out = rmsnorm_fwd(_rows(ops["x"], T, E), gamma, float(p["eps"]), 0.0)
    return {"out": out.reshape(-1)}


def _add_rmsnorm(ops: Operands, p: Params) -> Outputs:
    T, E = _int(p, "T"), _int(p, "E")
    s = (_rows(ops["a"], T, E).astype(F32) + _rows(ops["b"], T, E).astype(F32)).astype(F64)
    h = rmsnorm_fwd(s, ops["gamma"][:E], float(p["eps"]), 0.0)
    return {"s": s.reshape(-1), "h": h.reshape(-1)}


def _layernorm(ops: Operands, p: Params) -> Outputs:
    T, E = _int(p, "T"), _int(p, "E")
    x = _rows(ops["x"], T, E)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    out = (x - mu) / np.sqrt(var + float(p["eps"])) * ops["gamma"][:E] + ops["beta"][:E]
    return {"out": out.reshape(-1)}


def _product(x: np.ndarray, w: np.ndarray, M: int, N: int, K: int, p: Params) -> np.ndarray:
    """x[M, K] . w[N, K]^T; with ``p["int8_x"]`` (a block size) x quantized per block
    first (the decode GEMVs of block-quantized weights, the int8 prefill GEMMs of their
    panels)."""
    xs = _rows(x, M, K)
    if p.get("int8_x"):
        xs = quantized_x(xs, int(p["int8_x"]))
    return xs @ _rows(w, N, K).T


def _linear(ops: Operands, p: Params) -> Outputs:
    M, N, K = _int(p, "M"), _int(p, "N"), _int(p, "K")
    y = _product(ops["x"], ops["w"], M, N, K, p)
    if "b" in ops:
        y = y + ops["b"][:N]
    return {"y": y.reshape(-1)}


def _qkv(ops: Operands, p: Params) -> Outputs:
    M, K = _int(p, "M"), _int(p, "K")
    out: Outputs = {}
    for part in "qkv":
        n = _int(p, f"N{part}")
        y = _product(ops["x"], ops[f"w{part}"], M, n, K, p)
        if f"b{part}" in ops:
            y = y + ops[f"b{part}"][:n]
        out[part] = y.reshape(-1)
    return out


def _gate_up(ops: Operands, p: Params) -> Outputs:
    M, N, K = _int(p, "M"), _int(p, "N"), _int(p, "K")
    # the fused kernel rounds both products to f32 before the activation
    g = _product(ops["x"], ops["wg"], M, N, K, p).astype(F32).astype(F64)
    u = _product(ops["x"], ops["wu"], M, N, K, p).astype(F32).astype(F64)
    return {"out": silu_mul(g, u).reshape(-1)}


def _matmul(ops: Operands, p: Params) -> Outputs:
    M, N, K = _int(p, "M"), _int(p, "N"), _int(p, "K")
    return {"c": (_rows(ops["a"], M, K) @ _rows(ops["b"], K, N)).reshape(-1)}


def _matmul_relu(ops: Operands, p: Params) -> Outputs:
    return {"c": np.maximum(_matmul(ops, p)["c"], 0.0)}


def _rope(ops: Operands, p: Params) -> Outputs:
    T, H, KV, D, P = (_int(p, s) for s in ("T", "H", "KV", "D", "P"))
    ramp = (float(p["ramp_w"]), float(p["ramp_i"]), float(p["ramp_0"]))
    kw = dict(R=_int(p, "R"), factor=float(p["factor"]), ramp=ramp, mscale=float(p["mscale"]))
    pos = range(P, P + T)
    q = rope_oracle(_rows(ops["q"], T, H * D), H, D, pos, float(p["theta"]), **kw)
    k = rope_oracle(_rows(ops["k"], T, KV * D), KV, D, pos, float(p["theta"]), **kw)
    return {"q": q.reshape(-1), "k": k.reshape(-1)}


def _rope_ext(q_name: str, k_name: str, sign: float) -> Callable[[Operands, Params], Outputs]:
    """rope_ext (``sign`` 1) and rope_ext_bwd (-1): the rotation by per-pair divisors."""

    def run(ops: Operands, p: Params) -> Outputs:
        T, H, KV, D, P = (_int(p, s) for s in ("T", "H", "KV", "D", "P"))
        ext = p["ext"]
        assert isinstance(ext, tuple)
        kw = dict(R=_int(p, "R"), mscale=float(p["mscale"]), ext=ext, sign=sign)
        pos, theta = range(P, P + T), float(p["theta"])
        q = rope_oracle(_rows(ops[q_name], T, H * D), H, D, pos, theta, **kw)
        k = rope_oracle(_rows(ops[k_name], T, KV * D), KV, D, pos, theta, **kw)
        return {q_name: q.reshape(-1), k_name: k.reshape(-1)}

    return run


def _kv_store(ops: Operands, p: Params) -> Outputs:
    T, P, KVD = _int(p, "T"), _int(p, "P", 0), _int(p, "KVD")
    out: Outputs = {}
    for src, cache in (("k", "kcache"), ("v", "vcache")):
        c = ops[cache][: (P + T) * KVD].copy()
        c[P * KVD :] = ops[src][: T * KVD]
        out[cache] = c
    return out


def _attention(ops: Operands, p: Params) -> Outputs:
    T, P, H, KV, D = (_int(p, s) for s in ("T", "P", "H", "KV", "D"))
    scale = float(p.get("scale", 1.0 / math.sqrt(D)))
    softcap, window = float(p.get("softcap", 0.0)), _int(p, "window", 0)
    q = _rows(ops["q"], T, H * D)
    kc, vc = _rows(ops["kcache"], P + T, KV * D), _rows(ops["vcache"], P + T, KV * D)
    out = attention_oracle(q, kc, vc, T, P, H, KV, D, scale, softcap, window)
    return {"out": out.reshape(-1)}


def _attention_bias(ops: Operands, p: Params) -> Outputs:
    T, S, H, KV, D, Dv = (_int(p, s) for s in ("T", "S", "H", "KV", "D", "Dv"))
    args = [
        ops["q"][: T * H * D],
        ops["k"][: S * KV * D],
        ops["v"][: S * KV * Dv],
        ops["bias"][: H * T * S],
    ]
    out, scores = attention_bias_oracle(*args, p)  # type: ignore[arg-type]
    return {"out": out.reshape(-1), "scores": scores.reshape(-1)}


def _elementwise(
    f: Callable[..., np.ndarray], *names: str
) -> Callable[[Operands, Params], Outputs]:
    def run(ops: Operands, p: Params) -> Outputs:
        n = _int(p, "n")
        return {"out": f(*(ops[name][:n] for name in names), p)}

    return run


def _softmax(ops: Operands, p: Params) -> Outputs:
    x = _rows(ops["x"], _int(p, "rows"), _int(p, "cols"))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": (e / e.sum(axis=1, keepdims=True)).reshape(-1)}


def _copy_last_row(ops: Operands, p: Params) -> Outputs:
    T, cols = _int(p, "T"), _int(p, "cols")
    return {"out": _rows(ops["x"], T, cols)[T - 1].copy()}


def _cross_entropy(ops: Operands, p: Params) -> Outputs:
    T, V = _int(p, "T"), _int(p, "V")
    x = _rows(ops["logits"], T, V)
    m = x.max(axis=1, keepdims=True)
    logz = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
    picked = x[np.arange(T), ops["targets"][:T]]
    return {"loss": np.array([np.mean(logz - picked)])}


def _cross_entropy_bwd(ops: Operands, p: Params) -> Outputs:
    T, V = _int(p, "T"), _int(p, "V")
    x = _rows(ops["logits"], T, V)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    sm = e / e.sum(axis=1, keepdims=True)
    targets = ops["targets"][:T]
    loss = np.mean(-np.log(sm[np.arange(T), targets]))
    sm[np.arange(T), targets] -= 1.0
    return {"loss": np.array([loss]), "dlogits": (sm / T).reshape(-1)}


def _embed_bwd(ops: Operands, p: Params) -> Outputs:
    T, E = _int(p, "T"), _int(p, "E")
    table = ops["dtable"].reshape(-1, E).copy()
    np.add.at(table, ops["tokens"][:T], _rows(ops["dy"], T, E))
    return {"dtable": table.reshape(-1)}


def _linear_bwd_input(ops: Operands, p: Params) -> Outputs:
    M, N, K = _int(p, "M"), _int(p, "N"), _int(p, "K")
    return {"dx": (_rows(ops["dy"], M, N) @ _rows(ops["w"], N, K)).reshape(-1)}


def _linear_bwd_weight(ops: Operands, p: Params) -> Outputs:
    M, N, K = _int(p, "M"), _int(p, "N"), _int(p, "K")
    return {"dw": (_rows(ops["dy"], M, N).T @ _rows(ops["x"], M, K)).reshape(-1)}


def _rmsnorm_bwd(ops: Operands, p: Params) -> Outputs:
    T, E = _int(p, "T"), _int(p, "E")
    x, dy = _rows(ops["x"], T, E), _rows(ops["dy"], T, E)
    gamma = ops["gamma"][:E]
    offset = float(p.get("offset", 0.0))
    if offset:  # gamma + offset is formed in f32
        gamma = (gamma.astype(F32) + F32(offset)).astype(F64)
    dx, dgamma = rmsnorm_bwd_oracle(x, gamma, dy, float(p["eps"]))
    return {"dx": dx.reshape(-1), "dgamma": ops["dgamma"][:E] + dgamma}


def _rope_bwd(ops: Operands, p: Params) -> Outputs:
    T, H, KV, D, P = (_int(p, s) for s in ("T", "H", "KV", "D", "P"))
    ramp = (float(p["ramp_w"]), float(p["ramp_i"]), float(p["ramp_0"]))
    kw = dict(R=_int(p, "R"), factor=float(p["factor"]), ramp=ramp, mscale=float(p["mscale"]))
    pos, theta = range(P, P + T), float(p["theta"])
    dq = rope_oracle(_rows(ops["dq"], T, H * D), H, D, pos, theta, sign=-1.0, **kw)
    dk = rope_oracle(_rows(ops["dk"], T, KV * D), KV, D, pos, theta, sign=-1.0, **kw)
    return {"dq": dq.reshape(-1), "dk": dk.reshape(-1)}


def _attention_bwd(ops: Operands, p: Params) -> Outputs:
    T, H, KV, D = (_int(p, s) for s in ("T", "H", "KV", "D"))
    ext = dict(
        scale=float(p.get("scale", 1.0 / math.sqrt(D))), softcap=float(p.get("softcap", 0.0))
    )
    dq, dk, dv = attention_bwd_oracle(
        _rows(ops["q"], T, H * D),
        _rows(ops["k"], T, KV * D),
        _rows(ops["v"], T, KV * D),
        _rows(ops["out"], T, H * D),
        _rows(ops["dout"], T, H * D),
        H,
        KV,
        D,
        window=_int(p, "window", 0),
        **ext,
    )
    return {"dq": dq.reshape(-1), "dk": dk.reshape(-1), "dv": dv.reshape(-1)}


def _layernorm_bwd(ops: Operands, p: Params) -> Outputs:
    T, E = _int(p, "T"), _int(p, "E")
    x, dy = _rows(ops["x"], T, E), _rows(ops["dy"], T, E)
    dx, dgamma, dbeta = layernorm_bwd_oracle(x, ops["gamma"][:E], dy, float(p["eps"]))
    return {
        "dx": dx.reshape(-1),
        "dgamma": ops["dgamma"][:E] + dgamma,
        "dbeta": ops["dbeta"][:E] + dbeta,
    }


def _pos_embed_bwd(ops: Operands, p: Params) -> Outputs:
    T, E, P = _int(p, "T"), _int(p, "E"), _int(p, "P", 0)
    table = _rows(ops["dwpe"], P + T, E).copy()
    table[P:] += _rows(ops["dy"], T, E)
    return {"dwpe": table.reshape(-1)}


def _bias_bwd(ops: Operands, p: Params) -> Outputs:
    return {"db": _rows(ops["dy"], _int(p, "M"), _int(p, "N")).sum(axis=0)}


def _gated_bwd(act: Callable[[np.ndarray], np.ndarray], grad: Callable[[np.ndarray], np.ndarray]):
    def run(ops: Operands, p: Params) -> Outputs:
        n = _int(p, "n")
        g, u, dy = ops["gate"][:n], ops["up"][:n], ops["dy"][:n]
        return {"dgate": dy * u * grad(g), "dup": dy * act(g)}

    return run


def _unary_bwd(grad: Callable[[np.ndarray, Params], np.ndarray]):
    def run(ops: Operands, p: Params) -> Outputs:
        n = _int(p, "n")
        return {"dx": ops["dy"][:n] * grad(ops["x"][:n], p)}

    return run


def _silu(g: np.ndarray) -> np.ndarray:
    return g / (1.0 + np.exp(-g))


def _silu_grad(g: np.ndarray) -> np.ndarray:
    s = 1.0 / (1.0 + np.exp(-g))
    return s * (1.0 + g * (1.0 - s))


def _grad_sumsq(ops: Operands, p: Params) -> Outputs:
    g = ops["g"][: _int(p, "n")]
    return {"out": ops["out"][:1] + np.dot(g, g)}


def _clip_coef(ops: Operands, p: Params) -> Outputs:
    max_norm, sumsq = float(p["max_norm"]), float(ops["sumsq"][0])
    coef = 1.0 if max_norm <= 0 else min(1.0, max_norm / (math.sqrt(sumsq) + 1e-6))
    return {"coef": np.array([coef if math.isfinite(sumsq) else math.nan])}


def _adamw(ops: Operands, p: Params) -> Outputs:
    n, gscale = _int(p, "n"), float(ops["gscale"][0])
    w, m, v = ops["w"][:n], ops["m"][:n], ops["v"][:n]
    if not math.isfinite(gscale):
        return {"w": w, "m": m, "v": v}
    g = ops["g"][:n].astype(F32) * F32(gscale)  # the kernel scales g in f32
    hyper = (float(p[k]) for k in ("lr", "beta1", "beta2", "eps", "weight_decay"))
    w, m, v = adamw_oracle(w, g, m, v, *hyper, step=_int(p, "step"))
    return {"w": w, "m": m, "v": v}


#: kernel kind (the registry's ``op``) -> its reference over a call's operands and params
REFERENCE: dict[str, Callable[[Operands, Params], Outputs]] = {
    "embed": _embed,
    "pos_embed": _pos_embed,
    "rmsnorm": _rmsnorm,
    "rmsnorm_offset": _rmsnorm,
    "fused_add_rmsnorm": _add_rmsnorm,
    "layernorm": _layernorm,
    "linear": _linear,
    "fused_qkv": _qkv,
    "fused_gate_up": _gate_up,
    "matmul": _matmul,
    "fused_matmul_relu": _matmul_relu,
    "rope": _rope,
    "rope_ext": _rope_ext("q", "k", 1.0),
    "kv_store": _kv_store,
    "attention": _attention,
    "attention_ext": _attention,
    "attention_bias": _attention_bias,
    "add": _elementwise(lambda a, b, p: a + b, "a", "b"),
    "mul": _elementwise(lambda a, b, p: a * b, "a", "b"),
    "mul_scalar": _elementwise(lambda x, p: x * float(p["s"]), "x"),
    "swiglu": _elementwise(lambda g, u, p: silu_mul(g, u), "gate", "up"),
    "geglu": _elementwise(lambda g, u, p: gelu_tanh(g) * u, "gate", "up"),
    "gelu": _elementwise(lambda x, p: gelu_tanh(x), "x"),
    "relu": _elementwise(lambda x, p: np.maximum(x, 0.0), "x"),
    "softcap": _elementwise(lambda x, p: float(p["cap"]) * np.tanh(x / float(p["cap"])), "x"),
    "softmax": _softmax,
    "copy_last_row": _copy_last_row,
    "cross_entropy": _cross_entropy,
    "cross_entropy_bwd": _cross_entropy_bwd,
    "embed_bwd": _embed_bwd,
    "linear_bwd_input": _linear_bwd_input,
    "linear_bwd_weight": _linear_bwd_weight,
    "rmsnorm_bwd": _rmsnorm_bwd,
    "rope_bwd": _rope_bwd,
    "rope_ext_bwd": _rope_ext("dq", "dk", -1.0),
    "attention_bwd": _attention_bwd,
    "swiglu_bwd": _gated_bwd(_silu, _silu_grad),
    "geglu_bwd": _gated_bwd(gelu_tanh, gelu_tanh_grad),
    "gelu_bwd": _unary_bwd(lambda x, p: gelu_tanh_grad(x)),
    "gelu_erf": _elementwise(lambda x, p: gelu_erf(x), "x"),
    "gelu_erf_bwd": _unary_bwd(lambda x, p: gelu_erf_grad(x)),
    "softcap_bwd": _unary_bwd(lambda x, p: 1.0 - np.tanh(x / float(p["cap"])) ** 2),
    "attention_ext_bwd": _attention_bwd,
    "rmsnorm_offset_bwd": _rmsnorm_bwd,
    "layernorm_bwd": _layernorm_bwd,
    "pos_embed_bwd": _pos_embed_bwd,
    "bias_bwd": _bias_bwd,
    "scale": lambda ops, p: {"x": ops["x"][: _int(p, "n")] * float(p["s"])},
    "grad_sumsq": _grad_sumsq,
    "clip_coef": _clip_coef,
    "adamw": _adamw,
    "zero": lambda ops, p: {"x": np.zeros(_int(p, "n"))},
}
