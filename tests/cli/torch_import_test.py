#!/usr/bin/python3
"""PyTorch and Hugging Face models through attnbatch: import-weights from safetensors, heads from
the weights file, grouped-query attention and rotary embeddings, against torch itself and a
float64 numpy reference.

usage: torch_import_test.py ATTNBATCH CASE WORKDIR
cases:
  mha_causal     torch.nn.MultiheadAttention (H = 4, biases) saved as safetensors, imported,
                 run with ragged lengths and --causal (no --heads: the file's): /output within
                 1e-5 of torch on every valid row, /attention within 1e-5 of need_weights=True,
                 average_attn_weights=False; a contradicting --heads exits 2 naming both; the
                 Python exporter (scripts/torch_to_weights.py, live module and torch.save file)
                 writes the same matrices
  llama_gqa      a Llama-like layer (H = 8, G = 2, no biases, bfloat16, config.json beside it)
                 among others: without --prefix the layers are listed (exit 2); imported, run
                 with and without --rope-theta against a float64 numpy reference of grouped-query
                 attention; verify passes
  bert_layer     BERT naming (self.query/key/value, output.dense, biases, float16), --prefix and
                 config.json's head count, against the numpy reference
  qkv_kv_heads   --kv-heads with --query/--key/--value (packed and split, inferred or given,
                 with --rope-theta; multi-query G = 1) against the numpy reference; `weights`
                 recomputes the same maps
  import_errors  every bad model gets one line and the right exit code
  import_empty_extents  a projection with no rows or columns (q_proj, k_proj, v_proj, o_proj,
                 in_proj_weight, out_proj.weight) exits 3 naming the tensor (q_proj and k_proj
                 died of SIGFPE, an empty o_proj was dropped and the file written); a
                 config.json head count of 0, -4 or 2.5 exits 3 naming the key
  import_non_finite  NaN (F32), inf (F16) and 1e300 (F64, beyond float32) in the layer's
                 tensors exit 3 naming the tensor, the first bad element's index and its value
                 (the file was written and `run` refused it); a tensor relabelled F8_E4M3 or BOOL
                 exits 3 naming the dtype and the ones read
  import_over_input  --output naming the model itself (same spelling, ./ spelling, a symbolic
                 and a hard link) or its config.json exits 2 even with --force, and the model
                 is unchanged (it was replaced by the weights file)
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from harness import check, failures, fresh_directory, skip  # noqa: E402
from safetensors_file import save_safetensors  # noqa: E402

try:
    import torch  # noqa: E402  (python3-torch: scripts/install-deps.sh installs it)
except ImportError as error:
    skip("no PyTorch for %s (python3-torch): %s" % (sys.executable, error))

EPS32 = float(np.finfo(np.float32).eps)
BINARY = None


def attnbatch(*args, expect=0):
    result = subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    check(result.returncode == expect, "attnbatch %s: exit %d, expected %d: %s"
          % (" ".join(map(str, args[:3])), result.returncode, expect, result.stderr.strip()[-500:]))
    if expect != 0:
        lines = result.stderr.strip().splitlines()
        check(len(lines) == 1, "attnbatch %s: expected one error line, got %r" % (args[0], lines))
    return result


def write_input(path, x, lengths):
    with h5py.File(path, "w") as f:
        f["embeddings"] = x.astype(np.float32)
        f["lengths"] = np.asarray(lengths, dtype=np.int32)


def rope(x, theta):
    """Hugging Face's rotate_half rotary embeddings of x [m, heads, d] at positions 0..m-1."""
    m, d = x.shape[0], x.shape[2]
    inverse = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angle = np.arange(m, dtype=np.float64)[:, None] * inverse[None, :]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def attention_ref(q, k, v, heads, kv_heads, causal, rope_theta=0.0, scale=None):
    """Grouped-query attention of one sequence in float64: q [m, H, d_k], k [m, G, d_k],
    v [m, G, d_v] -> (output [m, H*d_v], weights [H, m, m]); query head h reads K/V head
    h // (H / G)."""
    m, d_k, d_v = q.shape[0], q.shape[2], v.shape[2]
    if rope_theta:
        q, k = rope(q, rope_theta), rope(k, rope_theta)
    scale = scale or 1.0 / np.sqrt(d_k)
    out = np.zeros((m, heads, d_v))
    weights = np.zeros((heads, m, m))
    for h in range(heads):
        g = h // (heads // kv_heads)
        s = scale * q[:, h] @ k[:, g].T
        if causal:
            s = np.where(np.tril(np.ones((m, m), bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        weights[h] = p
        out[:, h] = p @ v[:, g]
    return out.reshape(m, heads * d_v), weights


def projected_ref(x, lengths, w, heads, kv_heads, causal, rope_theta=0.0):
    """(output [N, L, D_out], attention [N, H, L, L]) in float64 from a weights file's arrays."""
    n, length = x.shape[0], x.shape[1]
    d_k = w["w_q"].shape[1] // heads
    d_v = w["w_v"].shape[1] // kv_heads
    d_out = w["w_o"].shape[1] if "w_o" in w else heads * d_v
    out = np.zeros((n, length, d_out))
    att = np.zeros((n, heads, length, length))
    bias = lambda name, width: w.get(name, np.zeros(width))  # noqa: E731
    for s in range(n):
        m = int(lengths[s])
        if m == 0:
            continue
        xs = x[s, :m].astype(np.float64)
        q = (xs @ w["w_q"] + bias("b_q", heads * d_k)).reshape(m, heads, d_k)
        k = (xs @ w["w_k"] + bias("b_k", kv_heads * d_k)).reshape(m, kv_heads, d_k)
        v = (xs @ w["w_v"] + bias("b_v", kv_heads * d_v)).reshape(m, kv_heads, d_v)
        o, p = attention_ref(q, k, v, heads, kv_heads, causal, rope_theta)
        if "w_o" in w:
            o = o @ w["w_o"] + bias("b_o", d_out)
        out[s, :m] = o
        att[s, :, :m, :m] = p
    return out, att


def derived_tolerance(reference, *lengths_of_sums):
    """float32 against float64: each chain of sums of n terms loses about n * eps of the
    magnitude it sums (Higham's gamma_n); the longest chains are the projections (d), the
    logits (d_k), the weighted values (L) and the output projection (H*d_v). Twice that,
    relative to the output's largest magnitude."""
    return 2.0 * EPS32 * sum(lengths_of_sums) * max(1.0, float(np.abs(reference).max()))


def compare_valid(name, got, ref, lengths, tolerance):
    worst = 0.0
    for s, m in enumerate(lengths):
        if m:
            worst = max(worst, float(np.abs(got[s, :m].astype(np.float64) - ref[s, :m]).max()))
    check(worst <= tolerance, "%s: max abs error %.3g on valid rows exceeds %.3g" % (name, worst, tolerance))
    print("%s: max abs error %.3g (tolerance %.3g)" % (name, worst, tolerance))
    return worst


def read_weights(path):
    with h5py.File(path, "r") as f:
        return {name: f[name][()].astype(np.float64) for name in f}, dict(f.attrs)


def mha_causal(work):
    torch.manual_seed(0)
    e, heads, n, length = 32, 4, 6, 20
    lengths = np.array([20, 13, 1, 7, 20, 16])
    mha = torch.nn.MultiheadAttention(e, heads, bias=True, batch_first=True)
    with torch.no_grad():  # PyTorch starts biases at zero: make them count
        mha.in_proj_bias.normal_(0, 0.2)
        mha.out_proj.bias.normal_(0, 0.2)
    x = torch.randn(n, length, e)
    x[torch.arange(length)[None, :] >= torch.from_numpy(lengths)[:, None]] = 0.0
    model = os.path.join(work, "mha.safetensors")
    save_safetensors(mha.state_dict(), model)
    weights = os.path.join(work, "w.h5")
    result = attnbatch("import-weights", "--input", model, "--output", weights, "--heads", heads)
    check("(nn.MultiheadAttention)" in result.stdout, "import-weights did not say nn.MultiheadAttention: " + result.stdout)
    _, attrs = read_weights(weights)
    check(int(attrs["heads"]) == heads and int(attrs["kv_heads"]) == heads, "weights attributes heads/kv_heads: %r" % attrs)
    check(attrs["source"] == os.path.abspath(model), "attribute source %r" % attrs.get("source"))
    check("in_proj_weight" in attrs["tensors"] and "out_proj.bias" in attrs["tensors"], "attribute tensors %r" % attrs["tensors"])

    data = os.path.join(work, "in.h5")
    write_input(data, x.numpy(), lengths)
    out = os.path.join(work, "out.h5")
    result = attnbatch("run", "--input", data, "--weights", weights, "--causal", "--output", out)  # no --heads
    check("H=4" in result.stdout, "run did not take H = 4 from the weights file: " + result.stdout[:300])
    refused = attnbatch("run", "--input", data, "--weights", weights, "--heads", 2, "--output", out + ".2", expect=2)
    check("--heads 2" in refused.stderr and "heads = 4" in refused.stderr, "contradicting --heads: " + refused.stderr)

    key_padding = torch.arange(length)[None, :] >= torch.from_numpy(lengths)[:, None]
    causal = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
    with torch.no_grad():
        ref_out, ref_w = mha(x, x, x, key_padding_mask=key_padding, attn_mask=causal, need_weights=True,
                             average_attn_weights=False)
    with h5py.File(out, "r") as f:
        got_out, got_w = f["output"][()], f["attention"][()]
        check(int(f.attrs["heads"]) == heads, "output attribute heads %r" % f.attrs["heads"])
    ref_out, ref_w = ref_out.numpy().astype(np.float64), ref_w.numpy().astype(np.float64)
    compare_valid("mha /output vs torch", got_out, ref_out, lengths, 1e-5)
    worst = 0.0
    for s, m in enumerate(lengths):
        worst = max(worst, float(np.abs(got_w[s, :, :m, :m] - ref_w[s, :, :m, :m]).max()))
    check(worst <= 1e-5, "mha /attention vs torch: max abs error %.3g exceeds 1e-5" % worst)
    print("mha /attention vs torch: max abs error %.3g (tolerance 1e-05)" % worst)
    attnbatch("verify", "--input", data, "--output", out, "--samples", "all")

    # The Python exporter, from the live module and from a torch.save file, writes the same matrices.
    from torch_to_weights import export_attention, main as export_main
    live = os.path.join(work, "w_live.h5")
    export_attention(mha, live)
    saved = os.path.join(work, "mha.pt")
    torch.save(mha.state_dict(), saved)
    from_file = os.path.join(work, "w_file.h5")
    check(export_main([saved, from_file, "--heads", str(heads)]) == 0, "torch_to_weights.py on a torch.save file failed")
    imported, _ = read_weights(weights)
    for path in (live, from_file):
        exported, exported_attrs = read_weights(path)
        check(sorted(exported) == sorted(imported), "%s holds %s, import-weights wrote %s" % (path, sorted(exported), sorted(imported)))
        for name in imported:
            if name in exported:
                check(np.array_equal(exported[name], imported[name]), "%s:/%s differs from import-weights'" % (path, name))
        check(int(exported_attrs["heads"]) == heads, "%s: attribute heads %r" % (path, exported_attrs.get("heads")))


def llama_layer(d, heads, kv_heads, d_k, seed):
    g = torch.Generator().manual_seed(seed)
    return {"q_proj.weight": torch.randn(heads * d_k, d, generator=g) / np.sqrt(d),
            "k_proj.weight": torch.randn(kv_heads * d_k, d, generator=g) / np.sqrt(d),
            "v_proj.weight": torch.randn(kv_heads * d_k, d, generator=g) / np.sqrt(d),
            "o_proj.weight": torch.randn(d, heads * d_k, generator=g) / np.sqrt(heads * d_k)}


def llama_gqa(work):
    d, heads, kv_heads, d_k, n, length = 64, 8, 2, 8, 5, 24
    lengths = np.array([24, 9, 17, 1, 24])
    state = {"model.embed_tokens.weight": torch.randn(100, d).to(torch.bfloat16), "model.norm.weight": torch.ones(d)}
    for layer in (0, 1):
        for name, value in llama_layer(d, heads, kv_heads, d_k, 10 + layer).items():
            state["model.layers.%d.self_attn.%s" % (layer, name)] = value.to(torch.bfloat16)
        state["model.layers.%d.mlp.up_proj.weight" % layer] = torch.randn(2 * d, d).to(torch.bfloat16)
    model_dir = os.path.join(work, "llama")
    os.makedirs(model_dir)
    model = os.path.join(model_dir, "model.safetensors")
    save_safetensors(state, model, metadata={"format": "pt"})
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": d, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
                   "rope_theta": 10000.0, "max_position_embeddings": 128}, f)

    weights = os.path.join(work, "w.h5")
    listed = attnbatch("import-weights", "--input", model, "--output", weights, expect=2)
    check("model.layers.0.self_attn" in listed.stderr and "model.layers.1.self_attn" in listed.stderr and "--prefix" in listed.stderr,
          "several layers without --prefix: " + listed.stderr)
    result = attnbatch("import-weights", "--input", model, "--output", weights, "--prefix", "model.layers.0.self_attn")
    check("BF16 tensors converted to float32" in result.stdout, "no note of the bfloat16 conversion: " + result.stdout)
    w, attrs = read_weights(weights)
    check(int(attrs["heads"]) == heads and int(attrs["kv_heads"]) == kv_heads, "heads/kv_heads %r" % attrs)
    check(float(attrs["rope_theta"]) == 10000.0 and attrs["model_type"] == "llama" and attrs["naming"] == "llama",
          "rope_theta/model_type/naming %r" % attrs)
    check(w["w_k"].shape == (d, kv_heads * d_k) and "b_q" not in w, "w_k shape %r, datasets %r" % (w["w_k"].shape, sorted(w)))
    exact = state["model.layers.0.self_attn.k_proj.weight"].to(torch.float64).numpy().T
    check(np.array_equal(w["w_k"], exact), "/w_k is not k_proj.weight (bfloat16) transposed exactly")

    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, length, d)).astype(np.float32)
    data = os.path.join(work, "in.h5")
    write_input(data, x, lengths)
    for theta in (0.0, 10000.0):
        out = os.path.join(work, "out_%g.h5" % theta)
        extra = ["--rope-theta", theta] if theta else []
        result = attnbatch("run", "--input", data, "--weights", weights, "--causal", "--output", out, *extra)
        check("H=8 G=2" in result.stdout, "run header lacks H=8 G=2: " + result.stdout[:300])
        if not theta:
            check("--rope-theta 10000" in result.stdout, "no hint that the file records rope_theta: " + result.stdout[:500])
        ref_out, ref_att = projected_ref(x, lengths, w, heads, kv_heads, True, theta)
        with h5py.File(out, "r") as f:
            check(float(f.attrs["rope_theta"]) == theta and int(f.attrs["kv_heads"]) == kv_heads,
                  "output attributes rope_theta %r kv_heads %r" % (f.attrs["rope_theta"], f.attrs["kv_heads"]))
            tolerance = derived_tolerance(ref_out, d, d_k, length, heads * d_k)
            compare_valid("llama /output rope_theta=%g vs numpy float64" % theta, f["output"][()], ref_out, lengths, tolerance)
            compare_valid("llama /attention rope_theta=%g vs numpy float64" % theta, f["attention"][()], ref_att, lengths,
                          derived_tolerance(ref_att, d, d_k))
        attnbatch("verify", "--input", data, "--output", out, "--samples", "all")
    refused = attnbatch("run", "--input", data, "--weights", weights, "--kv-heads", 4, "--output", os.path.join(work, "x.h5"),
                        expect=2)
    check("--kv-heads 4" in refused.stderr and "kv_heads = 2" in refused.stderr, "contradicting --kv-heads: " + refused.stderr)
    same = attnbatch("run", "--input", data, "--weights", weights, "--heads", heads, "--kv-heads", kv_heads, "--causal",
                     "--output", os.path.join(work, "same.h5"))
    with h5py.File(os.path.join(work, "out_0.h5"), "r") as a, h5py.File(os.path.join(work, "same.h5"), "r") as b:
        check(a["output"][()].tobytes() == b["output"][()].tobytes(), "--heads/--kv-heads equal to the file's changed the output")
    with h5py.File(os.path.join(work, "out_0.h5"), "r") as a, h5py.File(os.path.join(work, "out_10000.h5"), "r") as b:
        check(not np.allclose(a["output"][()], b["output"][()]), "--rope-theta changed nothing")


def qkv_kv_heads(work):
    heads, kv_heads, d_k, d_v, n, length = 8, 2, 8, 6, 4, 16
    lengths = np.array([16, 5, 11, 16])
    rng = np.random.default_rng(5)
    q = rng.standard_normal((n, length, heads * d_k)).astype(np.float32)
    k = rng.standard_normal((n, length, kv_heads * d_k)).astype(np.float32)
    v = rng.standard_normal((n, length, kv_heads * d_v)).astype(np.float32)
    data = os.path.join(work, "qkv.h5")
    with h5py.File(data, "w") as f:
        f["query"], f["key"], f["value"] = q, k, v
        f["q_split"] = q.reshape(n, length, heads, d_k).transpose(0, 2, 1, 3)
        f["k_split"] = k.reshape(n, length, kv_heads, d_k).transpose(0, 2, 1, 3)
        f["v_split"] = v.reshape(n, length, kv_heads, d_v).transpose(0, 2, 1, 3)
        f["lengths"] = lengths.astype(np.int32)
    packed = ["--query", "/query", "--key", "/key", "--value", "/value"]
    split = ["--query", "/q_split", "--key", "/k_split", "--value", "/v_split"]
    for theta in (0.0, 500.0):
        rope_option = ["--rope-theta", theta] if theta else []
        ref = np.zeros((n, length, heads * d_v))
        for s in range(n):
            m = lengths[s]
            ref[s, :m] = attention_ref(q[s, :m].reshape(m, heads, d_k).astype(np.float64),
                                       k[s, :m].reshape(m, kv_heads, d_k).astype(np.float64),
                                       v[s, :m].reshape(m, kv_heads, d_v).astype(np.float64), heads, kv_heads, True, theta)[0]
        outputs = {}
        for label, options in (("given", packed + ["--heads", heads, "--kv-heads", kv_heads]),
                               ("inferred", packed + ["--heads", heads]),
                               ("split", split + ["--kv-heads", kv_heads])):
            out = os.path.join(work, "out_%s_%g.h5" % (label, theta))
            attnbatch("run", "--input", data, *options, "--causal", "--output", out, *rope_option)
            with h5py.File(out, "r") as f:
                outputs[label] = f["output"][()]
                check(int(f.attrs["kv_heads"]) == kv_heads, "%s: attribute kv_heads %r" % (label, f.attrs["kv_heads"]))
            compare_valid("qkv %s rope_theta=%g vs numpy float64" % (label, theta), outputs[label], ref, lengths,
                          derived_tolerance(ref, d_k, length))
            attnbatch("verify", "--input", data, "--output", out, "--samples", "all")
        # `weights` recomputes the maps from /lse with the same K/V head per query head.
        maps = os.path.join(work, "maps_%g.h5" % theta)
        attnbatch("weights", "--input", data, "--output", os.path.join(work, "out_given_%g.h5" % theta), "--sequences", "0:4",
                  "--to", maps)
        with h5py.File(maps, "r") as m, h5py.File(os.path.join(work, "out_given_%g.h5" % theta), "r") as f:
            worst = float(np.abs(m["attention"][()] - f["attention"][()]).max())
            check(worst <= 1e-5, "weights subcommand, rope_theta=%g: maps differ from the run's by %.3g" % (theta, worst))
        check(outputs["given"].tobytes() == outputs["inferred"].tobytes() == outputs["split"].tobytes(),
              "rope_theta=%g: packed (given, inferred) and split Q/K/V give different bytes" % theta)
    # Multi-query attention: one K/V head for all eight query heads.
    with h5py.File(data, "a") as f:
        f["k1"], f["v1"] = k[:, :, :d_k], v[:, :, :d_v]
    out = os.path.join(work, "out_mqa.h5")
    attnbatch("run", "--input", data, "--query", "/query", "--key", "/k1", "--value", "/v1", "--heads", heads, "--causal",
              "--output", out)
    ref = np.zeros((n, length, heads * d_v))
    for s in range(n):
        m = lengths[s]
        ref[s, :m] = attention_ref(q[s, :m].reshape(m, heads, d_k).astype(np.float64), k[s, :m, None, :d_k].astype(np.float64),
                                   v[s, :m, None, :d_v].astype(np.float64), heads, 1, True)[0]
    with h5py.File(out, "r") as f:
        check(int(f.attrs["kv_heads"]) == 1, "multi-query: attribute kv_heads %r" % f.attrs["kv_heads"])
        compare_valid("qkv multi-query (G = 1) vs numpy float64", f["output"][()], ref, lengths, derived_tolerance(ref, d_k, length))
    refused = attnbatch("run", "--input", data, *packed, "--heads", heads, "--kv-heads", 3, "--output", os.path.join(work, "x.h5"),
                        expect=2)
    check("--kv-heads 3" in refused.stderr, "--kv-heads 3: " + refused.stderr)
    refused = attnbatch("run", "--input", data, *split, "--kv-heads", 4, "--output", os.path.join(work, "x.h5"), expect=2)
    check("--kv-heads 4" in refused.stderr and "G = 2" in refused.stderr, "--kv-heads 4 on split input: " + refused.stderr)


def bert_layer(work):
    """BERT naming (self.query/key/value, output.dense, biases), two layers, --prefix picks the
    second; the heads from config.json; float16 tensors converted."""
    d, heads, n, length = 48, 4, 3, 12
    lengths = np.array([12, 7, 3])
    g = torch.Generator().manual_seed(4)
    state = {}
    for layer in (0, 1):
        p = "bert.encoder.layer.%d.attention." % layer
        for name in ("self.query", "self.key", "self.value", "output.dense"):
            state[p + name + ".weight"] = (torch.randn(d, d, generator=g) / np.sqrt(d)).to(torch.float16)
            state[p + name + ".bias"] = (0.1 * torch.randn(d, generator=g)).to(torch.float16)
        state[p + "output.LayerNorm.weight"] = torch.ones(d)
    model_dir = os.path.join(work, "bert")
    os.makedirs(model_dir)
    model = os.path.join(model_dir, "model.safetensors")
    save_safetensors(state, model)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"model_type": "bert", "hidden_size": d, "num_attention_heads": heads}, f)
    weights = os.path.join(work, "w.h5")
    result = attnbatch("import-weights", "--input", model, "--output", weights, "--prefix", "bert.encoder.layer.1.attention")
    check("(bert)" in result.stdout and "F16 tensors converted" in result.stdout, "bert import: " + result.stdout)
    w, attrs = read_weights(weights)
    check(int(attrs["heads"]) == heads and sorted(w) == ["b_k", "b_o", "b_q", "b_v", "w_k", "w_o", "w_q", "w_v"],
          "bert weights: heads %r, datasets %r" % (attrs.get("heads"), sorted(w)))
    check(np.array_equal(w["w_o"], state["bert.encoder.layer.1.attention.output.dense.weight"].to(torch.float64).numpy().T),
          "/w_o is not output.dense.weight transposed")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((n, length, d)).astype(np.float32)
    data = os.path.join(work, "in.h5")
    write_input(data, x, lengths)
    out = os.path.join(work, "out.h5")
    attnbatch("run", "--input", data, "--weights", weights, "--output", out)
    ref, _ = projected_ref(x, lengths, w, heads, heads, False)
    with h5py.File(out, "r") as f:
        compare_valid("bert /output vs numpy float64", f["output"][()], ref, lengths, derived_tolerance(ref, d, d // heads, length, d))


def import_errors(work):
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(32, 4)
    good = os.path.join(work, "mha.safetensors")
    save_safetensors(mha.state_dict(), good)
    out = os.path.join(work, "w.h5")

    def refused(path, code, *words, options=()):
        result = attnbatch("import-weights", "--input", path, "--output", out, *options, expect=code)
        for word in words:
            check(word in result.stderr, "%s: %r not in %r" % (os.path.basename(path), word, result.stderr))
        check(not os.path.exists(out) and not os.path.exists(out + ".partial"), "a refused import left %s" % out)

    with open(good, "rb") as f:
        content = f.read()
    truncated = os.path.join(work, "truncated.safetensors")
    with open(truncated, "wb") as f:
        f.write(content[: len(content) // 2])
    refused(truncated, 3, "truncated", options=("--heads", 4))
    text = os.path.join(work, "notes.safetensors")
    with open(text, "w") as f:
        f.write("these are not weights, just a long enough text file\n")
    refused(text, 3, "not a safetensors file", options=("--heads", 4))
    refused(os.path.join(work, "absent.safetensors"), 4, "absent.safetensors")
    refused(good, 2, "--heads 5", "32", options=("--heads", 5))
    refused(good, 2, "head count", "--heads")
    state = llama_layer(32, 4, 2, 8, 0)
    del state["k_proj.weight"]
    missing = os.path.join(work, "missing.safetensors")
    save_safetensors({"layers.0.attn." + k: v for k, v in state.items()}, missing)
    refused(missing, 3, "layers.0.attn.k_proj.weight", "found:", "layers.0.attn.q_proj.weight", options=("--heads", 4))
    unrelated = os.path.join(work, "mlp.safetensors")
    save_safetensors({"fc1.weight": torch.randn(8, 4), "fc1.bias": torch.randn(8)}, unrelated)
    refused(unrelated, 3, "no attention layer", "fc1.weight")
    refused(good, 2, "--prefix encoder", "(top level)", options=("--heads", 4, "--prefix", "encoder"))
    bad_kv = os.path.join(work, "gqa.safetensors")
    save_safetensors(llama_layer(32, 4, 2, 8, 0), bad_kv)
    refused(bad_kv, 2, "--kv-heads 4", "G = 2", options=("--heads", 4, "--kv-heads", 4))


def refuse(work, model, code, words, options=(), out=None):
    """import-weights of `model` exits `code`, one line holding every word, and writes nothing."""
    scratch = out is None
    out = out or os.path.join(work, "w.h5")
    result = attnbatch("import-weights", "--input", model, "--output", out, *options, expect=code)
    for word in words:
        check(word in result.stderr, "%s: %r not in %r" % (os.path.basename(model), word, result.stderr))
    check(not os.path.exists(out + ".partial"), "a refused import left %s.partial" % out)
    if scratch and os.path.exists(out):
        check(False, "%s: a refused import wrote %s" % (os.path.basename(model), out))
        os.remove(out)  # so that the next case fails for its own reason
    return result


def import_empty_extents(work):
    prefix = "model.layers.0.self_attn."
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        state = llama_layer(16, 4, 2, 4, 0)
        state[name + ".weight"] = torch.zeros(0, 16)
        model = os.path.join(work, "empty_%s.safetensors" % name)
        save_safetensors({prefix + k: v for k, v in state.items()}, model)
        refuse(work, model, 3, [prefix + name + ".weight", "[0, 16]", "at least one row"], options=("--heads", 4))
    no_columns = llama_layer(16, 4, 2, 4, 0)
    no_columns["q_proj.weight"] = torch.zeros(16, 0)
    model = os.path.join(work, "no_columns.safetensors")
    save_safetensors(no_columns, model)
    refuse(work, model, 3, ["q_proj.weight", "[16, 0]"], options=("--heads", 4))
    mha = torch.nn.MultiheadAttention(16, 4).state_dict()
    for name, shape in (("in_proj_weight", (0, 16)), ("out_proj.weight", (0, 16))):
        state = dict(mha)
        state[name] = torch.zeros(*shape)
        if name == "in_proj_weight":
            del state["in_proj_bias"]
        else:
            del state["out_proj.bias"]
        model = os.path.join(work, "mha_empty_%s.safetensors" % name)
        save_safetensors(state, model)
        refuse(work, model, 3, [name, "[0, 16]"], options=("--heads", 4))
    for value in (0, -4, 2.5):
        directory = os.path.join(work, "config_%s" % value)
        os.makedirs(directory)
        model = os.path.join(directory, "model.safetensors")
        save_safetensors(llama_layer(16, 4, 2, 4, 0), model)
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump({"num_attention_heads": value, "num_key_value_heads": 2}, f)
        refuse(work, model, 3, ["num_attention_heads", str(value)])
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump({"num_attention_heads": 4, "num_key_value_heads": value}, f)
        refuse(work, model, 3, ["num_key_value_heads", str(value)])


def rewrite_header(source, target, change):
    """Copies the safetensors file `source` to `target` with change(header) applied."""
    with open(source, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        data = f.read()
    change(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(target, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


def import_non_finite(work):
    torch.manual_seed(2)
    state = {k: v.detach().numpy() for k, v in torch.nn.MultiheadAttention(16, 4).state_dict().items()}
    cases = (("nan", np.float32, (5, 3), np.nan, "nan"), ("inf", np.float16, (40, 15), np.inf, "inf"),
             ("overflow", np.float64, (17, 0), -1e300, "-1e+300"))
    for name, dtype, index, value, text in cases:
        tensors = {k: v.astype(dtype) for k, v in state.items()}
        tensors["in_proj_weight"][index] = value
        model = os.path.join(work, "%s.safetensors" % name)
        save_safetensors(tensors, model)
        refuse(work, model, 3, ["in_proj_weight", "[%d, %d]" % index, text], options=("--heads", 4))
    bias = {k: v.copy() for k, v in state.items()}
    bias["out_proj.bias"][7] = -np.inf
    model = os.path.join(work, "bias.safetensors")
    save_safetensors(bias, model)
    refuse(work, model, 3, ["out_proj.bias", "[7]", "-inf"], options=("--heads", 4))
    good = os.path.join(work, "good.safetensors")
    save_safetensors(state, good)
    for dtype in ("F8_E4M3", "BOOL"):
        model = os.path.join(work, "%s.safetensors" % dtype)
        rewrite_header(good, model, lambda header: header["in_proj_weight"].__setitem__("dtype", dtype))
        refuse(work, model, 3, ["in_proj_weight", dtype, "F32, F16, BF16 or F64"], options=("--heads", 4))


def import_over_input(work):
    torch.manual_seed(3)
    directory = os.path.join(work, "model")
    os.makedirs(directory)
    model = os.path.join(directory, "model.safetensors")
    save_safetensors(torch.nn.MultiheadAttention(16, 4).state_dict(), model)
    config = os.path.join(directory, "config.json")
    with open(config, "w") as f:
        json.dump({"num_attention_heads": 4}, f)
    os.symlink(model, os.path.join(work, "link.safetensors"))
    os.link(model, os.path.join(work, "hard.safetensors"))

    def content():
        with open(model, "rb") as f:
            model_bytes = f.read()
        with open(config, "rb") as f:
            return model_bytes, f.read()

    before = content()
    spellings = (model, os.path.join(directory, ".", "model.safetensors"), os.path.join(work, "link.safetensors"),
                 os.path.join(work, "hard.safetensors"), config)
    for out in spellings:
        refuse(work, model, 2, ["--output", "same file"], options=("--force",), out=out)
        check(content() == before, "--output %s --force changed the model or its config" % out)
    # From the model's directory, the bare name and ./ differ as strings only.
    result = subprocess.run([BINARY, "import-weights", "--input", "model.safetensors", "--output", "./model.safetensors",
                             "--force"], cwd=directory, capture_output=True, text=True, timeout=120)
    check(result.returncode == 2, "--output ./model.safetensors: exit %d, expected 2: %s" % (result.returncode, result.stderr))
    check(content() == before, "--output ./model.safetensors --force changed the model")
    attnbatch("import-weights", "--input", model, "--output", os.path.join(work, "w.h5"))


CASES = {"mha_causal": mha_causal, "llama_gqa": llama_gqa, "bert_layer": bert_layer, "qkv_kv_heads": qkv_kv_heads,
         "import_errors": import_errors, "import_empty_extents": import_empty_extents,
         "import_non_finite": import_non_finite, "import_over_input": import_over_input}


def main():
    global BINARY
    if len(sys.argv) != 4 or sys.argv[2] not in CASES:
        print(__doc__)
        return 2
    BINARY, case, work = sys.argv[1], sys.argv[2], sys.argv[3]
    fresh_directory(work)
    CASES[case](work)
    print("%s: %d failure(s)" % (case, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
