#!/usr/bin/python3
"""PyTorch's side of the training acceptance (benchmarks/train.sh): one epoch of the guide CNN or
the MLP of ANCHORS.md on Fashion-MNIST, with the same batch size, optimiser, normalisation and
thread count as ember's bench_train, then the test accuracy. Prints one JSON line.

    train_torch.py --model cnn|mlp [--threads N] [--epochs N] [--seed S] [--data DIR]
                   [--config NAME] [--report-threads N]

--threads is torch.set_num_threads; --report-threads is the thread count the run stands for
(torch at 1 thread with OpenBLAS at 2 stands for 2); --config names the configuration.
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
from torch import nn


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    def find(name):
        for candidate in (name, name + ".gz"):
            p = os.path.join(data_dir, candidate)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(os.path.join(data_dir, name))
    images = read_idx(find(f"{prefix}-images-idx3-ubyte")).astype(np.float32)
    labels = read_idx(find(f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
    images = (images / 255.0 - 0.1307) / 0.3081  # the normalisation of ember's MnistBatcher
    return torch.from_numpy(images), torch.from_numpy(labels)


class Cnn(nn.Module):
    """Burn's guide model: conv 1→8, 8→16 (3×3), adaptive avg pool 8×8, 1024→512→10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.pool = nn.AdaptiveAvgPool2d((8, 8))
        self.dropout = nn.Dropout(0.5)
        self.linear1 = nn.Linear(16 * 8 * 8, 512)
        self.linear2 = nn.Linear(512, 10)

    def forward(self, images):
        n, h, w = images.shape
        x = images.reshape(n, 1, h, w)
        x = self.dropout(self.conv1(x))
        x = torch.relu(self.dropout(self.conv2(x)))
        x = self.pool(x).reshape(n, 16 * 8 * 8)
        x = torch.relu(self.dropout(self.linear1(x)))
        return self.linear2(x)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(),
                                 nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))

    def forward(self, images):
        return self.net(images)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--report-threads", type=int)
    ap.add_argument("--config", default="")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--data", default=os.environ.get("EMBER_DATA_DIR",
                                                     "/usr/share/datasets/fashion-mnist"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train_x, train_y = load(args.data, "train")
    test_x, test_y = load(args.data, "test")
    model = Cnn() if args.model == "cnn" else Mlp()
    lr = 1e-4 if args.model == "cnn" else 1e-3
    optim = torch.optim.Adam(model.parameters(), lr=lr)  # eps 1e-8, as ember's bench sets it
    loss_fn = nn.CrossEntropyLoss()

    epoch_times = []
    for _ in range(args.epochs):
        model.train()
        start = time.perf_counter()
        order = torch.randperm(len(train_x))
        for s in range(0, len(order), args.batch_size):
            idx = order[s:s + args.batch_size]
            loss = loss_fn(model(train_x[idx]), train_y[idx])
            optim.zero_grad()
            loss.backward()
            optim.step()
        epoch_times.append(time.perf_counter() - start)

    model.eval()
    with torch.no_grad():
        correct = sum(int((model(test_x[s:s + 500]).argmax(1) == test_y[s:s + 500]).sum())
                      for s in range(0, len(test_x), 500))
    print(json.dumps({"framework": "pytorch", "version": torch.__version__, "model": args.model,
                      "threads": args.report_threads or args.threads,
                      "config": args.config, "epoch_s": epoch_times,
                      "test_accuracy": 100.0 * correct / len(test_x)}))


if __name__ == "__main__":
    main()
