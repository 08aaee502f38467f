#!/usr/bin/python3
"""Trains a small Fashion-MNIST CNN in PyTorch for the import examples and writes what they use:

  onnx-inference/fashion_cnn.onnx     the model in ONNX (opset 13, dynamic batch)
  pytorch-import/fashion_cnn.pt       its state_dict (torch.save)
  */expected.bin                      PyTorch's predicted class for each of the 10,000 test
                                      images (one byte each), which the examples must reproduce

The data is Debian's dataset-fashion-mnist. One epoch of Adam takes under a minute on a CPU and
reaches about 85% test accuracy. Pixels are scaled to [0, 1] and standardised with the mean and
deviation of ember's mnist example (0.1307, 0.3081). Run with Debian's python3 (python3-torch):

  /usr/bin/python3 examples/onnx-inference/train_export.py
"""
import gzip
import os

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.dirname(HERE)


def idx(name):
    with gzip.open(os.path.join(DATA, name)) as f:
        raw = f.read()
    if name.endswith("idx3-ubyte.gz"):
        return np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 28, 28)
    return np.frombuffer(raw, np.uint8, offset=8)


def normalise(images):
    x = torch.tensor(images, dtype=torch.float32) / 255.0
    return ((x - 0.1307) / 0.3081).unsqueeze(1)  # [N, 1, 28, 28]


class FashionCnn(nn.Module):
    """Conv 1→8 3×3, ReLU, max pool 2; conv 8→16 3×3, ReLU, max pool 2; linear 400→64, ReLU;
    linear 64→10."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(400, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    train_x, train_y = normalise(idx("train-images-idx3-ubyte.gz")), torch.tensor(
        idx("train-labels-idx1-ubyte.gz"), dtype=torch.long)
    test_x, test_y = normalise(idx("t10k-images-idx3-ubyte.gz")), idx("t10k-labels-idx1-ubyte.gz")
    model = FashionCnn()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    perm = torch.randperm(len(train_x))
    model.train()
    for k in range(0, len(perm), 64):
        b = perm[k:k + 64]
        loss = nn.functional.cross_entropy(model(train_x[b]), train_y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(test_x).argmax(1).numpy().astype(np.uint8)
    print(f"test accuracy {100.0 * (pred == test_y).mean():.2f}%")
    torch.onnx.export(model, test_x[:1], os.path.join(HERE, "fashion_cnn.onnx"), opset_version=13,
                      input_names=["images"], output_names=["scores"],
                      dynamic_axes={"images": {0: "batch"}, "scores": {0: "batch"}})
    torch.save(model.state_dict(), os.path.join(EXAMPLES, "pytorch-import", "fashion_cnn.pt"))
    for d in ("onnx-inference", "pytorch-import"):
        pred.tofile(os.path.join(EXAMPLES, d, "expected.bin"))
    print("wrote fashion_cnn.onnx, fashion_cnn.pt and expected.bin")


if __name__ == "__main__":
    main()
