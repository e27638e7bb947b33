"""The fp64 reference of attention for the Python module's tests: numpy in float64, written
from the documented definition (docs/formats.md) (projections, heads, grouped K/V heads, causal and length masks, padding
rows zero in the output and -inf in lse), sharing no code with the engine."""
import numpy as np


def attention64(x=None, q=None, k=None, v=None, heads=1, kv_heads=None, causal=False, lengths=None,
                scale=None, projections=None):
    """(output [N, L, D_out], lse [N, H, L]) in float64."""
    if x is not None:
        x = x.astype(np.float64)
        if projections:
            p = {name: np.asarray(a, dtype=np.float64) for name, a in projections.items()}
            q = x @ p["w_q"] + p.get("b_q", 0)
            k = x @ p["w_k"] + p.get("b_k", 0)
            v = x @ p["w_v"] + p.get("b_v", 0)
        else:
            q = k = v = x
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    n, length = q.shape[0], q.shape[1]
    dk = q.shape[2] // heads
    groups = kv_heads or k.shape[2] // dk
    dv = v.shape[2] // groups
    scale = 1.0 / np.sqrt(dk) if scale is None else scale
    lengths = np.full(n, length) if lengths is None else np.asarray(lengths)
    out = np.zeros((n, length, heads * dv))
    lse = np.full((n, heads, length), -np.inf)
    rows = np.arange(length)
    for s in range(n):
        valid = int(lengths[s])
        for h in range(heads):
            g = h // (heads // groups)
            qh = q[s, :, h * dk:(h + 1) * dk]
            kh = k[s, :, g * dk:(g + 1) * dk]
            vh = v[s, :, g * dv:(g + 1) * dv]
            scores = qh @ kh.T * scale
            mask = rows[None, :] >= valid
            if causal:
                mask = mask | (rows[None, :] > rows[:, None])
            scores = np.where(mask, -np.inf, scores)
            for i in range(valid):
                top = scores[i].max()
                e = np.exp(scores[i] - top)
                total = e.sum()
                out[s, i, h * dv:(h + 1) * dv] = (e / total) @ vh
                lse[s, h, i] = top + np.log(total)
    if projections and "w_o" in projections:
        p = {name: np.asarray(a, dtype=np.float64) for name, a in projections.items()}
        projected = out @ p["w_o"] + p.get("b_o", 0)
        for s in range(n):
            projected[s, int(lengths[s]):] = 0
        out = projected
    return out, lse


def relative_error(a, b):
    """||a - b|| / ||b||, Frobenius, over the rows both hold."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))
