"""Linear regression whose SGD updates (about 1e-3) are below half a bf16 step at the weights (about 2e-3):
kept in bf16 with round-to-nearest-even they are lost, with stochastic rounding they count on average.

    XLA_USE_BF16=1 NEURON_RT_STOCHASTIC_ROUNDING_EN=1 trnsim torchrun tests/xla/scripts/bf16_regression.py OUT
"""
import sys

import torch
import torch_xla

STEPS = 150


def train(device, after_step=lambda step, tensors: None) -> float:
    torch.manual_seed(0)
    x = torch.randn(256, 32)
    y = x @ (1 + 0.05 * torch.randn(32, 1))
    x, y = x.to(device), y.to(device)
    w = torch.nn.Parameter(torch.ones(32, 1, device=device))
    opt = torch.optim.SGD([w], lr=0.01)
    for step in range(STEPS):
        opt.zero_grad()
        ((x @ w - y) ** 2).mean().backward()
        opt.step()
        torch_xla.sync()
        after_step(step, [w, x, y])
    return ((x @ w - y) ** 2).mean().item()


if __name__ == "__main__":
    loss = train(torch_xla.device())
    with open(sys.argv[1], "w") as f:
        f.write(repr(loss))
