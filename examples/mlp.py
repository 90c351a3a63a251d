"""The model, synthetic data and options the training examples share: a 3-layer MLP regressing sin of its inputs."""
import argparse

import torch

IN, HIDDEN, OUT = 64, 256, 16


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.GELU(), torch.nn.Linear(HIDDEN, HIDDEN),
                               torch.nn.GELU(), torch.nn.Linear(HIDDEN, OUT))


def batch(rank: int, step: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The synthetic batch of one rank at one step: inputs and regression targets."""
    g = torch.Generator().manual_seed(1000 * rank + step)
    x = torch.randn(size, IN, generator=g)
    return x, torch.sin(x[:, :OUT]) + 0.1 * torch.randn(size, OUT, generator=g)


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--save-all", help="directory where every rank saves its final weights")
    return p.parse_args()
