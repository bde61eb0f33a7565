#!/usr/bin/python3
"""PyTorch's side of the layer agreement tests (tests/torch_layers_test.cc):
one layer's forward and backward on the tensors the test wrote.

  layer_reference.py LAYER DIR --shape N,...,D [--eps E]
      reads DIR/x.f32 (the input, float32 little-endian, SHAPE) and
      DIR/dy.f32 (dL/dy, SHAPE); for layer_norm also DIR/gamma.f32 and
      DIR/beta.f32 ([D]); writes DIR/y.f32 and DIR/dx.f32, and for
      layer_norm DIR/dgamma.f32 and DIR/dbeta.f32.
  LAYER: layer_norm (torch.nn.LayerNorm(D, eps)) or gelu (torch.nn.GELU()).
"""
import argparse
import os

import numpy as np
import torch


def read(path, shape):
    return torch.from_numpy(np.fromfile(path, dtype="<f4").reshape(shape).copy())


def write(path, t):
    t.detach().numpy().astype("<f4").tofile(path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("layer", choices=["layer_norm", "gelu"])
    parser.add_argument("dir")
    parser.add_argument("--shape", required=True)
    parser.add_argument("--eps", type=float, default=1e-5)
    args = parser.parse_args()
    shape = [int(s) for s in args.shape.split(",")]
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
