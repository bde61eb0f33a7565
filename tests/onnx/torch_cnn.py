#!/usr/bin/python3
"""A small PyTorch CNN for 28x28x1 images, the network pstrain imports from ONNX.

  /usr/bin/python3 tests/onnx/torch_cnn.py --export OUT.onnx [--seed 1] [--channels 8,16]

writes the untrained network (seeded) with torch.onnx.export in training form
(TrainingMode.TRAINING, no constant folding), so BatchNormalization and Dropout
stay in the graph: what pstrain's ONNX import reads (onnx/onnx_import.h).
The model is defined in make_model(seed) for the comparisons built on it.
"""
import argparse
import sys

import torch
from torch import nn


class Cnn(nn.Module):
    """conv 3x3 -> BN -> ReLU -> max pool 2, twice; flatten; dropout; 2 linears."""

    def __init__(self, channels=(8, 16), hidden=32, classes=10, dropout=0.25):
        super().__init__()
        c1, c2 = channels
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(c1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(c2)
        self.pool = nn.MaxPool2d(2)
        self.dropout = nn.Dropout(dropout)
        self.fc1 = nn.Linear(c2 * 7 * 7, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = self.pool(torch.relu(self.bn2(self.conv2(x))))
        x = x.view(x.size(0), -1)
        x = self.dropout(x)
        x = torch.relu(self.fc1(x))
        return self.fc2(x)  # logits


def make_model(seed, channels=(8, 16), hidden=32):
    """The CNN with weights drawn from `seed` (PyTorch's default initializers)."""
    torch.manual_seed(seed)
    return Cnn(channels=channels, hidden=hidden)


def export(model, path):
    """Writes `model` to `path` as ONNX in training form.

    torch.onnx.export traces one forward pass in training mode, which moves
    BatchNorm's running statistics (and num_batches_tracked): the file holds
    the moved values, and so does `model` afterwards. Compare the file with
    `model` as it is after this call, not with a fresh make_model(seed).
    """
    model.train()
    torch.onnx.export(
        model,
        torch.zeros(2, 1, 28, 28),
        path,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        opset_version=13,
        input_names=['images'],
        output_names=['logits'],
        dynamic_axes={'images': {0: 'batch'}, 'logits': {0: 'batch'}})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--export', metavar='OUT.onnx', required=True,
                        help='write the untrained network here as ONNX')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--channels', default='8,16',
                        help='the two convolutions\' filters, e.g. 8,16')
    parser.add_argument('--hidden', type=int, default=32, help='the first linear\'s units')
    args = parser.parse_args()
    channels = tuple(int(c) for c in args.channels.split(','))
    if len(channels) != 2 or min(channels) < 1:
        sys.exit('--channels is two positive numbers, e.g. 8,16')
    export(make_model(args.seed, channels, args.hidden), args.export)
    return 0


if __name__ == '__main__':
    sys.exit(main())
