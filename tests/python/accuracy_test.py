#!/usr/bin/python3
"""attnbatch.attention against the fp64 reference and against PyTorch.

Cases: embeddings split into heads, Q/K/V with grouped K/V heads, projections with biases and
w_o; causal and ragged lengths (one of them 0). Against torch (Debian's python3-torch 1.13):
nn.MultiheadAttention with H=4 and the same projections, causal mask and key padding mask;
and for GQA (which 1.13's MultiheadAttention and functional API lack) the softmax(Q K^T s) V
of torch's own float32 ops with K/V heads repeated.

Tolerance (normwise, ||a - b||_F / ||b||_F over the valid rows): each float32 path carries a
rounding error of about u * sqrt(n) per reduction of length n (u = 2^-24, errors of random
sign add as a random walk), summed over the reductions of the pipeline: the projection (d),
the scores (d_k), the softmax sum and P V (L each) and w_o (H*d_v). Against fp64 each path
must stay below that bound (1.4e-6 to 2.4e-6 for these shapes; measured: 1e-7 to 3e-7);
against each other, below the sum of two such bounds, and below the issue's 1e-6, the
tighter of the two here.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, exit_status  # noqa: E402
from reference import attention64, relative_error  # noqa: E402

import attnbatch  # noqa: E402

U = 2.0 ** -24


def bound(*reductions):
    return U * sum(np.sqrt(n) for n in reductions)


def valid_rows(a, lengths):
    return np.concatenate([a[s, :int(n)] for s, n in enumerate(lengths)])


def main():
    rng = np.random.default_rng(23)
    n, length, heads, d = 6, 96, 4, 64
    dk = d // heads
    lengths = np.array([96, 1, 50, 0, 77, 13], dtype=np.int32)

    # 1. Embeddings split into heads, causal, ragged: against fp64.
    x = rng.standard_normal((n, length, d), dtype=np.float32)
    out, lse = attnbatch.attention(x, heads=heads, causal=True, lengths=lengths, return_lse=True)
    ref, ref_lse = attention64(x=x, heads=heads, causal=True, lengths=lengths)
    limit = bound(dk, length, length)
    err = relative_error(valid_rows(out, lengths), valid_rows(ref, lengths))
    print(f"embeddings H={heads} causal ragged vs fp64: {err:.3g} (bound {limit:.3g})")
    check(err <= limit, f"embeddings vs fp64: {err:.3g} > {limit:.3g}")
    check(all(not out[s, int(m):].any() for s, m in enumerate(lengths)), "padding rows of the output are not zero")
    finite = np.isfinite(ref_lse)
    check(np.array_equal(np.isfinite(lse), finite), "lse is -inf on other rows than the padding")
    check(np.max(np.abs(lse[finite] - ref_lse[finite])) <= 1e-5 * max(1.0, np.max(np.abs(ref_lse[finite]))),
          "lse differs from the fp64 reference")

    # 2. Projections with biases and w_o: against fp64 and nn.MultiheadAttention.
    import torch

    scale_w = 1 / np.sqrt(d)
    proj = {name: (rng.standard_normal(shape) * scale_w).astype(np.float32) for name, shape in
            (("w_q", (d, d)), ("w_k", (d, d)), ("w_v", (d, d)), ("w_o", (d, d)))}
    proj.update({name: (rng.standard_normal(d) * 0.1).astype(np.float32) for name in ("b_q", "b_k", "b_v", "b_o")})
    ragged = np.array([96, 1, 50, 5, 77, 13], dtype=np.int32)  # torch gives NaN rows for length 0
    out = attnbatch.attention(x, heads=heads, causal=True, lengths=ragged, projections=proj)
    ref, _ = attention64(x=x, heads=heads, causal=True, lengths=ragged, projections=proj)
    limit = bound(d, dk, length, length, d)
    err = relative_error(valid_rows(out, ragged), valid_rows(ref, ragged))
    print(f"projections H={heads} causal ragged vs fp64: {err:.3g} (bound {limit:.3g})")
    check(err <= limit, f"projections vs fp64: {err:.3g} > {limit:.3g}")

    mha = torch.nn.MultiheadAttention(d, heads, bias=True, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([proj["w_q"].T, proj["w_k"].T, proj["w_v"].T])))
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([proj["b_q"], proj["b_k"], proj["b_v"]])))
        mha.out_proj.weight.copy_(torch.from_numpy(proj["w_o"].T.copy()))
        mha.out_proj.bias.copy_(torch.from_numpy(proj["b_o"]))
        causal_mask = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
        padding = torch.from_numpy(np.arange(length)[None, :] >= ragged[:, None])
        xt = torch.from_numpy(x)
        theirs, _ = mha(xt, xt, xt, attn_mask=causal_mask, key_padding_mask=padding, need_weights=False)
    theirs = theirs.numpy()
    torch_err = relative_error(valid_rows(theirs, ragged), valid_rows(ref, ragged))
    err = relative_error(valid_rows(out, ragged), valid_rows(theirs, ragged))
    print(f"projections H={heads} causal ragged vs nn.MultiheadAttention: {err:.3g} (torch vs fp64 {torch_err:.3g}; "
          f"bound {2 * limit:.3g}, asked 1e-6)")
    check(err <= 2 * limit and err <= 1e-6, f"vs nn.MultiheadAttention: {err:.3g}")

    # 3. Q/K/V with G=2 K/V heads (GQA), causal, ragged: against fp64 and torch's float32 ops.
    groups, dv = 2, 24
    q = rng.standard_normal((n, length, heads * dk), dtype=np.float32)
    k = rng.standard_normal((n, length, groups * dk), dtype=np.float32)
    v = rng.standard_normal((n, length, groups * dv), dtype=np.float32)
    out = attnbatch.attention(q, k, v, heads=heads, kv_heads=groups, causal=True, lengths=ragged)
    ref, _ = attention64(q=q, k=k, v=v, heads=heads, kv_heads=groups, causal=True, lengths=ragged)
    limit = bound(dk, length, length)
    err = relative_error(valid_rows(out, ragged), valid_rows(ref, ragged))
    print(f"GQA H={heads} G={groups} causal ragged vs fp64: {err:.3g} (bound {limit:.3g})")
    check(err <= limit, f"GQA vs fp64: {err:.3g} > {limit:.3g}")
    qt = torch.from_numpy(q).view(n, length, heads, dk).transpose(1, 2)
    kt = torch.from_numpy(k).view(n, length, groups, dk).transpose(1, 2).repeat_interleave(heads // groups, dim=1)
    vt = torch.from_numpy(v).view(n, length, groups, dv).transpose(1, 2).repeat_interleave(heads // groups, dim=1)
    mask = causal_mask[None, None] | padding[:, None, None, :]
    scores = (qt @ kt.transpose(-1, -2)) * (1 / np.sqrt(dk))
    theirs = (torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ vt).transpose(1, 2).reshape(n, length, heads * dv)
    err = relative_error(valid_rows(out, ragged), valid_rows(theirs.numpy(), ragged))
    print(f"GQA H={heads} G={groups} causal ragged vs torch float32: {err:.3g} (bound {2 * limit:.3g}, asked 1e-6)")
    check(err <= 2 * limit and err <= 1e-6, f"GQA vs torch: {err:.3g}")

    # 4. float16 input is the float32 of its values; one sequence [L, d] drops the batch axis.
    x16 = x.astype(np.float16)
    check(np.array_equal(attnbatch.attention(x16, heads=heads), attnbatch.attention(x16.astype(np.float32), heads=heads)),
          "float16 input differs from its float32 conversion")
    one = attnbatch.attention(x[2], heads=heads, causal=True)
    check(one.shape == (length, d) and np.array_equal(one, attnbatch.attention(x[2:3], heads=heads, causal=True)[0]),
          "[L, d] input differs from [1, L, d]")

    # 5. Maps: rows of valid queries sum to 1; mean is the mean over heads.
    out, maps = attnbatch.attention(x, heads=heads, lengths=ragged, return_maps="all")
    _, mean = attnbatch.attention(x, heads=heads, lengths=ragged, return_maps="mean")
    check(maps.shape == (n, heads, length, length) and mean.shape == (n, 1, length, length), "maps' shapes")
    sums = maps[0, :, :int(ragged[0])].sum(axis=-1)
    check(np.allclose(sums, 1, atol=1e-5), "attention rows do not sum to 1")
    check(np.allclose(mean[:, 0], maps.mean(axis=1), atol=1e-6), "mean maps are not the mean over heads")
    _, maps16 = attnbatch.attention(x, heads=heads, return_maps="all", maps_dtype="float16")
    check(maps16.dtype == np.float16, "maps_dtype float16 gives " + str(maps16.dtype))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
