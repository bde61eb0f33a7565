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

  layer_reference.py mmoe DIR --shape N,D --experts E --tasks T --units U1,...,Uk
      a multi-gate mixture of experts built from torch.nn.Linear, ReLU and
      softmax: reads DIR/x.f32 ([N, D]), DIR/dy.f32 ([N, T * Uk]) and
      DIR/params.f32, pstrain's variables in its order (models/mmoe.h: per
      expert and layer kernel [in, out] and bias, then per task the gate's
      kernel [D, E] and bias); writes y.f32, dx.f32 and dparams.f32 (the
      variables' gradients in the same order and layout).
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


def mmoe(args, shape):
    n, d = shape
    units = [int(u) for u in args.units.split(",")]
    x = read(os.path.join(args.dir, "x.f32"), shape).requires_grad_(True)
    dy = read(os.path.join(args.dir, "dy.f32"), [n, args.tasks * units[-1]])
    flat = read(os.path.join(args.dir, "params.f32"), [-1])
    linears = []  # in pstrain's order of variables

    def linear(fan_in, fan_out):
        # pstrain's kernels are [in, out]; torch.nn.Linear's weight [out, in].
        at = sum(l.weight.numel() + l.bias.numel() for l in linears)
        layer = torch.nn.Linear(fan_in, fan_out)
        with torch.no_grad():
            layer.weight.copy_(flat[at:at + fan_in * fan_out].reshape(fan_in, fan_out).t())
            layer.bias.copy_(flat[at + fan_in * fan_out:at + fan_in * fan_out + fan_out])
        linears.append(layer)
        return layer

    experts = []
    for _ in range(args.experts):
        layers, fan_in = [], d
        for u in units:
            layers += [linear(fan_in, u), torch.nn.ReLU()]
            fan_in = u
        experts.append(torch.nn.Sequential(*layers))
    gates = [linear(d, args.experts) for _ in range(args.tasks)]
    if sum(l.weight.numel() + l.bias.numel() for l in linears) != flat.numel():
        raise SystemExit("params.f32 has %d values, not the layer's" % flat.numel())
    stacked = torch.stack([expert(x) for expert in experts], dim=1)  # [N, E, U]
    tasks = [torch.einsum("ne,neu->nu", torch.softmax(gate(x), dim=1), stacked) for gate in gates]
    y = torch.cat(tasks, dim=1)
    y.backward(dy)
    write(os.path.join(args.dir, "y.f32"), y)
    write(os.path.join(args.dir, "dx.f32"), x.grad)
    grads = []
    for l in linears:
        grads += [l.weight.grad.t().reshape(-1), l.bias.grad]
    write(os.path.join(args.dir, "dparams.f32"), torch.cat(grads))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("layer", choices=["layer_norm", "gelu", "mha", "mmoe"])
    parser.add_argument("dir")
    parser.add_argument("--shape", required=True)
    parser.add_argument("--eps", type=float, default=1e-5)
    parser.add_argument("--query_shape", default="")
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--experts", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=1)
    parser.add_argument("--units", default="")
    args = parser.parse_args()
    shape = [int(s) for s in args.shape.split(",")]
    torch.set_default_dtype(torch.float32)
    if args.layer == "mha":
        attention(args, shape)
        return
    if args.layer == "mmoe":
        mmoe(args, shape)
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
