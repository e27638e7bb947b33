#!/usr/bin/python3
"""Writes the projection weights file `attnbatch run --weights` reads from one attention layer of
a PyTorch model given as a live nn.Module or a state dict (e.g. a torch.save file): what
`attnbatch import-weights` does for .safetensors files, for users who have none.

Naming schemes (relative to the layer's prefix P), as import-weights reads them:
  nn.MultiheadAttention  P.in_proj_weight [3E, E] (or P.q_proj_weight, P.k_proj_weight,
                         P.v_proj_weight), P.in_proj_bias, P.out_proj.weight/.bias
  bert                   P.self.query/key/value.weight/.bias, P.output.dense.weight/.bias
  llama                  P.q_proj/k_proj/v_proj/o_proj.weight (biases optional), fewer K/V heads
Every [out, in] matrix is written transposed, [in, out], as float32; the file records heads,
kv_heads, the source and the tensors read. A live nn.MultiheadAttention (or a module with
num_heads / num_key_value_heads) says its own head counts; a state dict needs --heads.

As a command (Debian's /usr/bin/python3 has torch, h5py and numpy):
  /usr/bin/python3 scripts/torch_to_weights.py STATE.pt W.h5 [--prefix P] [--heads H] [--kv-heads G]
      [--rope-theta T] [--force]
From Python:
  sys.path.insert(0, "scripts"); from torch_to_weights import export_attention
  export_attention(torch.nn.MultiheadAttention(64, 4), "w.h5")
  export_attention(model.state_dict(), "w.h5", prefix="model.layers.0.self_attn", heads=8)
"""
import argparse
import os
import sys

import h5py
import numpy as np

MARKERS = (("in_proj_weight", "nn.MultiheadAttention"), ("q_proj_weight", "nn.MultiheadAttention"),
           ("self.query.weight", "bert"), ("query.weight", "bert"), ("q_proj.weight", "llama"))


class ExportError(Exception):
    """One line saying what is wrong, as attnbatch's errors do."""


def _join(prefix, name):
    return prefix + "." + name if prefix else name


def _numpy(value):
    if hasattr(value, "detach"):
        import torch
        return value.detach().to(torch.float32).cpu().numpy()
    return np.asarray(value, dtype=np.float32)


def find_attention_layers(state):
    """{prefix: naming} of every attention layer the tensor names show."""
    layers = {}
    for name in state:
        for suffix, naming in MARKERS:
            if not name.endswith(suffix):
                continue
            prefix = name[: -len(suffix)]
            if prefix and not prefix.endswith("."):
                continue
            layers.setdefault(prefix[:-1] if prefix else "", naming)
            break
    return dict(sorted(layers.items()))


def _linear(state, prefix, name, required=True):
    """(weight [out, in], bias [out] or None, tensor names) of P.name.weight/.bias."""
    key = _join(prefix, name + ".weight")
    if key not in state:
        if not required:
            return None, None, []
        found = sorted(k for k in state if k.startswith(prefix + ".") or not prefix)
        raise ExportError("the layer %s has no tensor %s; found: %s" % (prefix or "(top level)", key, ", ".join(found[:12])))
    bias_key = _join(prefix, name + ".bias")
    bias = _numpy(state[bias_key]) if bias_key in state else None
    return _numpy(state[key]), bias, [key] + ([bias_key] if bias is not None else [])


def layer_matrices(state, prefix, naming):
    """{"w_q", "w_k", "w_v", "w_o", "b_q", ...: arrays in PyTorch's [out, in] layout} and the
    tensor names read."""
    m, names = {}, []
    if naming == "nn.MultiheadAttention":
        packed = state.get(_join(prefix, "in_proj_weight"))
        if packed is not None:
            w = _numpy(packed)
            e = w.shape[0] // 3
            m["w_q"], m["w_k"], m["w_v"] = w[:e], w[e:2 * e], w[2 * e:]
            names.append(_join(prefix, "in_proj_weight"))
        else:
            for role in "qkv":
                key = _join(prefix, role + "_proj_weight")
                if key not in state:
                    raise ExportError("the layer %s has no tensor %s" % (prefix or "(top level)", key))
                m["w_" + role] = _numpy(state[key])
                names.append(key)
        bias = state.get(_join(prefix, "in_proj_bias"))
        if bias is not None:
            b = _numpy(bias)
            q, k = m["w_q"].shape[0], m["w_k"].shape[0]
            m["b_q"], m["b_k"], m["b_v"] = b[:q], b[q:q + k], b[q + k:]
            names.append(_join(prefix, "in_proj_bias"))
        m["w_o"], m["b_o"], read = _linear(state, prefix, "out_proj")
        names += read
    else:
        if naming == "llama":
            roles = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}
        elif _join(prefix, "self.query.weight") in state:
            roles = {"q": "self.query", "k": "self.key", "v": "self.value", "o": "output.dense"}
        else:
            roles = {"q": "query", "k": "key", "v": "value", "o": None}
        for role, name in roles.items():
            if name is None:
                continue
            w, b, read = _linear(state, prefix, name, required=role != "o" or naming == "llama")
            if w is None:
                continue
            m["w_" + role] = w
            if b is not None:
                m["b_" + role] = b
            names += read
    return m, names


def _module_heads(module):
    """(heads, kv_heads) a live module states, zeros where it does not."""
    heads = getattr(module, "num_heads", 0) or getattr(module, "num_attention_heads", 0) or 0
    kv_heads = getattr(module, "num_key_value_heads", 0) or 0
    config = getattr(module, "config", None)
    if config is not None:
        heads = heads or getattr(config, "num_attention_heads", 0) or 0
        kv_heads = kv_heads or getattr(config, "num_key_value_heads", 0) or 0
    return int(heads), int(kv_heads)


def export_attention(source, output, prefix=None, heads=None, kv_heads=None, rope_theta=None, force=False):
    """Writes `output` from `source`: an nn.Module, a state dict, or the path of a torch.save
    file. Returns a dict of what was written (layer, naming, heads, kv_heads, d, d_k, d_v)."""
    module_heads, module_kv = 0, 0
    source_name = "<state dict>"
    if isinstance(source, (str, os.PathLike)):
        import torch
        source_name = os.path.abspath(source)
        source = torch.load(source, map_location="cpu")
    if hasattr(source, "state_dict"):
        module_heads, module_kv = _module_heads(source)
        source_name = "<nn.Module %s>" % type(source).__name__ if source_name == "<state dict>" else source_name
        source = source.state_dict()
    layers = find_attention_layers(source)
    if not layers:
        raise ExportError("no attention layer found: expected nn.MultiheadAttention, BERT-like or Llama-like tensors; "
                          "found: %s" % ", ".join(sorted(source)[:12]))
    if prefix is None:
        if len(layers) > 1:
            raise ExportError("%d attention layers: %s; pass prefix= (--prefix) to pick one"
                              % (len(layers), ", ".join("%s (%s)" % item for item in layers.items())))
        prefix = next(iter(layers))
    prefix = prefix.rstrip(".")
    if prefix not in layers:
        raise ExportError("prefix %r names no attention layer; layers: %s" % (prefix, ", ".join(layers)))
    naming = layers[prefix]
    m, names = layer_matrices(source, prefix, naming)

    heads = heads or module_heads
    if not heads:
        raise ExportError("the head count is not in a state dict; pass heads= (--heads H), H dividing %d"
                          % m["w_q"].shape[0])
    q_width, k_width, v_width = m["w_q"].shape[0], m["w_k"].shape[0], m["w_v"].shape[0]
    if q_width % heads:
        raise ExportError("%d query features do not split into %d heads" % (q_width, heads))
    d_k = q_width // heads
    kv_heads = kv_heads or module_kv or (k_width // d_k if k_width % d_k == 0 else 0)
    if not kv_heads or k_width != kv_heads * d_k or heads % kv_heads or v_width % kv_heads:
        raise ExportError("the key projection has %d features: no K/V head count G dividing H = %d fits d_k = %d"
                          % (k_width, heads, d_k))
    d_v = v_width // kv_heads
    d = m["w_q"].shape[1]
    if os.path.exists(output) and not force:
        raise ExportError("%s exists; pass force=True (--force) to replace it" % output)

    labels = {"w_q": ("d", "H*d_k"), "w_k": ("d", "G*d_k"), "w_v": ("d", "G*d_v"), "w_o": ("H*d_v", "d_out"),
              "b_q": ("H*d_k",), "b_k": ("G*d_k",), "b_v": ("G*d_v",), "b_o": ("d_out",)}
    partial = output + ".partial"
    with h5py.File(partial, "w") as f:
        for key in ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"):
            if key not in m:
                continue
            value = np.ascontiguousarray(m[key].T if key.startswith("w_") else m[key], dtype=np.float32)
            ds = f.create_dataset(key, data=value)
            for axis, label in enumerate(labels[key]):
                ds.dims[axis].label = label
            ds.attrs["source_tensor"] = "transposed" if key.startswith("w_") else "as is"
        f.attrs.update({"format": "attnbatch-weights", "generator": "scripts/torch_to_weights.py",
                        "heads": np.int64(heads), "kv_heads": np.int64(kv_heads), "dtype": "float32",
                        "head_dim": np.int64(d_k), "value_dim": np.int64(d_v), "source": source_name,
                        "source_format": "pytorch", "layer": prefix, "naming": naming, "tensors": ",".join(names)})
        if "w_o" in m:
            f.attrs["out_dim"] = np.int64(m["w_o"].shape[0])
        if rope_theta:
            f.attrs["rope_theta"] = float(rope_theta)
    os.replace(partial, output)
    return {"layer": prefix, "naming": naming, "heads": heads, "kv_heads": kv_heads, "d": d, "d_k": d_k, "d_v": d_v}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("state", help="a torch.save file: a state dict or a whole nn.Module")
    parser.add_argument("output", help="the weights file to write (HDF5)")
    parser.add_argument("--prefix", help="the layer's tensor-name prefix [the only one]")
    parser.add_argument("--heads", type=int, help="query heads H [the module's num_heads]")
    parser.add_argument("--kv-heads", type=int, help="K/V heads G [the module's, else from the shapes]")
    parser.add_argument("--rope-theta", type=float, help="record the model's rotary base (run applies it with --rope-theta)")
    parser.add_argument("--force", action="store_true", help="replace an existing output")
    args = parser.parse_args(argv)
    try:
        info = export_attention(args.state, args.output, args.prefix, args.heads, args.kv_heads, args.rope_theta, args.force)
    except ExportError as error:
        print("torch_to_weights: error: %s" % error, file=sys.stderr)
        return 2
    print("torch_to_weights: %s layer %s (%s) -> %s: d=%d H=%d G=%d d_k=%d d_v=%d"
          % (args.state, info["layer"] or "(top level)", info["naming"], args.output, info["d"], info["heads"],
             info["kv_heads"], info["d_k"], info["d_v"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
