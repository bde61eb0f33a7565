#!/usr/bin/python3
"""PyTorch's side of the ONNX import checks: what the network of torch_cnn.py
computes, for pstrain to compute the same from the ONNX file.

  torch_reference.py agreement OUT_DIR [--seed 1] [--batch 32]
      net.onnx          the untrained network (torch_cnn.export)
      images.f32        the first BATCH Fashion-MNIST test images, NHWC,
                        pixels / 255 (float32, little-endian)
      labels.i32        their labels (int32)
      logits.f32        PyTorch's logits in evaluation mode, [BATCH, 10]
      loss.txt          the mean cross-entropy of one training-mode step
                        (dropout off: its randomness is PyTorch's own)
      grads.onnx        the same network with each parameter replaced by its
                        gradient of that loss, so that pstrain's import puts
                        them in its own layout (HWIO kernels, permuted rows)

  torch_reference.py train STEPS [--seed 1] [--batch 200] [--lr 0.001]
      trains the same network in PyTorch (Adam, the same batch) on
      Fashion-MNIST and prints "accuracy = A" on the 10,000 test images.
"""
import argparse
import copy
import gzip
import os
import struct
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_cnn  # noqa: E402

DATA = '/usr/share/datasets/fashion-mnist'


def load(split):
    prefix = 'train' if split == 'train' else 't10k'
    with gzip.open(os.path.join(DATA, prefix + '-images-idx3-ubyte.gz')) as f:
        magic, n, h, w = struct.unpack('>IIII', f.read(16))
        images = np.frombuffer(f.read(n * h * w), np.uint8).reshape(n, 1, h, w)
    with gzip.open(os.path.join(DATA, prefix + '-labels-idx1-ubyte.gz')) as f:
        magic, n = struct.unpack('>II', f.read(8))
        labels = np.frombuffer(f.read(n), np.uint8)
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


def export_unchanged(model, path):
    # Tracing runs a training-mode forward pass, which moves batch norm's
    # running statistics: keep the model as it was.
    saved = copy.deepcopy(model.state_dict())
    torch_cnn.export(model, path)
    model.load_state_dict(saved)


def agreement(args):
    os.makedirs(args.out, exist_ok=True)
    model = torch_cnn.make_model(args.seed)
    # Non-trivial running statistics, so evaluation mode is really tested.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    # The file holds the statistics as the export's trace leaves them, and so
    # does the model after it.
    torch_cnn.export(model, os.path.join(args.out, 'net.onnx'))
    images, labels = load('test')
    x, y = images[:args.batch], labels[:args.batch]
    x.permute(0, 2, 3, 1).contiguous().numpy().astype('<f4').tofile(os.path.join(args.out, 'images.f32'))
    y.numpy().astype('<i4').tofile(os.path.join(args.out, 'labels.i32'))
    model.eval()
    with torch.no_grad():
        model(x).numpy().astype('<f4').tofile(os.path.join(args.out, 'logits.f32'))
    model.train()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    saved = copy.deepcopy(model.state_dict())
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    model.load_state_dict(saved)
    with open(os.path.join(args.out, 'loss.txt'), 'w') as f:
        f.write('%.9g\n' % loss.item())
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.grad)
    export_unchanged(model, os.path.join(args.out, 'grads.onnx'))
    return 0


def train(args):
    torch.set_num_threads(args.threads)
    model = torch_cnn.make_model(args.seed)
    images, labels = load('train')
    test_images, test_labels = load('test')
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(images), generator=g)
    pos = 0
    model.train()
    for step in range(args.steps):
        if pos + args.batch > len(images):
            order, pos = torch.randperm(len(images), generator=g), 0
        idx = order[pos:pos + args.batch]
        pos += args.batch
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(images[idx]), labels[idx])
        loss.backward()
        opt.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(test_images), 1000):
            correct += (model(test_images[i:i + 1000]).argmax(1) == test_labels[i:i + 1000]).sum().item()
    print('steps = %d, batch = %d, accuracy = %.4f' % (args.steps, args.batch,
                                                       correct / len(test_images)))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command', required=True)
    a = sub.add_parser('agreement')
    a.add_argument('out')
    a.add_argument('--seed', type=int, default=1)
    a.add_argument('--batch', type=int, default=32)
    t = sub.add_parser('train')
    t.add_argument('steps', type=int)
    t.add_argument('--seed', type=int, default=1)
    t.add_argument('--batch', type=int, default=200)
    t.add_argument('--lr', type=float, default=0.001)
    t.add_argument('--threads', type=int, default=1)
    args = parser.parse_args()
    return agreement(args) if args.command == 'agreement' else train(args)


if __name__ == '__main__':
    sys.exit(main())
