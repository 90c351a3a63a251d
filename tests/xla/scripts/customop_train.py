"""An MLP whose relu is a custom C++ operator (forward and backward), trained data-parallel on torch-xla.

    trnsim torchrun --nproc_per_node=2 customop_train.py BUILD_DIR OUT_DIR
"""
import os
import sys

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from torch_neuronx.xla_impl import custom_op

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "customop")
build_dir, out_dir = sys.argv[1], sys.argv[2]
custom_op.load(name="relu", compute_srcs=[os.path.join(HERE, "relu.cpp")],
               shape_srcs=[os.path.join(HERE, "shape.cpp")], build_directory=build_dir)


class Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.ops.my_ops.relu_forward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.ops.my_ops.relu_backward(grad, x)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 8))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(12, 16, generator=g), torch.randn(12, 8, generator=g)


def forward(model, x, relu):
    return model[1](relu(model[0](x)))


if __name__ == "__main__":
    device = xm.xla_device()
    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rank = xr.global_ordinal()
    for step in range(3):
        x, y = batch(rank, step)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(forward(model, x.to(device), Relu.apply), y.to(device))
        loss.backward()
        xm.optimizer_step(opt)
        torch_xla.sync()
    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, os.path.join(out_dir, f"rank{rank}.pt"))
