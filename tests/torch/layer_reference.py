#!/usr/bin/python3
"""PyTorch's side of the layer agreement tests (tests/torch_layers_test.cc):
one layer's forward and backward on the tensors the test wrote.

  layer_reference.py LAYER DIR --shape N,...,D [--eps E]
      reads DIR/x.f32 (the input, float32 little-endian, SHAPE) and
      DIR/dy.f32 (dL/dy, SHAPE); for layer_norm also DIR/gamma.f32 and
      DIR/beta.f32 ([D]); writes DIR/y.f32 and DIR/dx.f32, and for
      layer_norm DIR/dgamma.f32 and DIR/dbeta.f32.
  LAYER: layer_norm (torch.nn.LayerNorm(D, eps)) or gelu (torch.nn.GELU()).

  layer_reference.py mha DIR --shape N,L,K --query_shape N,Lq,E --heads H [--causal]
      torch.nn.MultiheadAttention(E, H, kdim=K, vdim=K, batch_first=True):
      reads DIR/x.f32 (keys and values, [N, L, K]), DIR/q.f32 (queries,
      [N, Lq, E]; absent: self-attention, x is the query), DIR/lengths.i32
      (each example's valid keys, int32 [N]: the rest padding), DIR/dy.f32
      ([N, Lq, E]) and the weights in pstrain's layout (kernels [in, out]):
      wq [E, E], bq, wk [K, E], bk, wv [K, E], bv, wo [E, E], bo; writes
      y.f32, dx.f32, dq.f32 (with q.f32) and the weights' gradients
      d<name>.f32 in the same layout.
"""
import argparse
import os

import numpy as np
import torch


def read(path, shape):
    return torch.from_numpy(np.fromfile(path, dtype="<f4").reshape(shape).copy())


def write(path, t):
    t.detach().numpy().astype("<f4").tofile(path)


def attention(args, shape):
    n, length, kdim = shape
    qshape = [int(s) for s in args.query_shape.split(",")]
    e = qshape[-1]
    d = args.dir
    cross = os.path.exists(os.path.join(d, "q.f32"))
    x = read(os.path.join(d, "x.f32"), shape).requires_grad_(True)
    q = read(os.path.join(d, "q.f32"), qshape).requires_grad_(True) if cross else x
    lengths = np.fromfile(os.path.join(d, "lengths.i32"), dtype="<i4")
    padding = torch.from_numpy(np.arange(length)[None, :] >= lengths[:, None])
    dy = read(os.path.join(d, "dy.f32"), qshape)
    layer = torch.nn.MultiheadAttention(e, args.heads, kdim=kdim, vdim=kdim, batch_first=True)
    w = {name: read(os.path.join(d, name + ".f32"), [-1]) for name in
         ["wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo"]}
    with torch.no_grad():
        # pstrain's kernels are [in, out]; PyTorch's weights [out, in].
        if layer._qkv_same_embed_dim:
            layer.in_proj_weight.copy_(torch.cat([w["wq"].reshape(e, e).t(),
                                                  w["wk"].reshape(kdim, e).t(),
                                                  w["wv"].reshape(kdim, e).t()]))
        else:
            layer.q_proj_weight.copy_(w["wq"].reshape(e, e).t())
            layer.k_proj_weight.copy_(w["wk"].reshape(kdim, e).t())
            layer.v_proj_weight.copy_(w["wv"].reshape(kdim, e).t())
        layer.in_proj_bias.copy_(torch.cat([w["bq"], w["bk"], w["bv"]]))
        layer.out_proj.weight.copy_(w["wo"].reshape(e, e).t())
        layer.out_proj.bias.copy_(w["bo"])
    mask = None
    if args.causal:
        mask = torch.triu(torch.ones(qshape[1], length, dtype=torch.bool), diagonal=1)
    y, _ = layer(q, x, x, key_padding_mask=padding, need_weights=False, attn_mask=mask)
    y.backward(dy)
    write(os.path.join(d, "y.f32"), y)
    write(os.path.join(d, "dx.f32"), x.grad)
    if cross:
        write(os.path.join(d, "dq.f32"), q.grad)
    if layer._qkv_same_embed_dim:
        gq, gk, gv = layer.in_proj_weight.grad.split([e, e, e])
    else:
        gq, gk, gv = (layer.q_proj_weight.grad, layer.k_proj_weight.grad,
                      layer.v_proj_weight.grad)
    gb = layer.in_proj_bias.grad
    for name, g in [("dwq", gq.t()), ("dwk", gk.t()), ("dwv", gv.t()), ("dbq", gb[:e]),
                    ("dbk", gb[e:2 * e]), ("dbv", gb[2 * e:]),
                    ("dwo", layer.out_proj.weight.grad.t()), ("dbo", layer.out_proj.bias.grad)]:
        write(os.path.join(d, name + ".f32"), g.contiguous())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("layer", choices=["layer_norm", "gelu", "mha"])
    parser.add_argument("dir")
    parser.add_argument("--shape", required=True)
    parser.add_argument("--eps", type=float, default=1e-5)
    parser.add_argument("--query_shape", default="")
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--causal", action="store_true")
    args = parser.parse_args()
    shape = [int(s) for s in args.shape.split(",")]
    torch.set_default_dtype(torch.float32)
    if args.layer == "mha":
        attention(args, shape)
        return
    torch.set_default_dtype(torch.float32)
    x = read(os.path.join(args.dir, "x.f32"), shape).requires_grad_(True)
    dy = read(os.path.join(args.dir, "dy.f32"), shape)
    if args.layer == "layer_norm":
        layer = torch.nn.LayerNorm(shape[-1], eps=args.eps)
        with torch.no_grad():
            layer.weight.copy_(read(os.path.join(args.dir, "gamma.f32"), [shape[-1]]))
            layer.bias.copy_(read(os.path.join(args.dir, "beta.f32"), [shape[-1]]))
    else:
        layer = torch.nn.GELU()
    y = layer(x)
    y.backward(dy)
    write(os.path.join(args.dir, "y.f32"), y)
    write(os.path.join(args.dir, "dx.f32"), x.grad)
    if args.layer == "layer_norm":
        write(os.path.join(args.dir, "dgamma.f32"), layer.weight.grad)
        write(os.path.join(args.dir, "dbeta.f32"), layer.bias.grad)


if __name__ == "__main__":
    main()
