"""The MLP of examples/mlp.py trained tensor-parallel with DTensor on the native `neuron` device.

    trnsim torchrun --nproc_per_node=2 --instance trn2.48xlarge examples/train_tp.py
    torchrun --nproc_per_node=32 examples/train_tp.py                  # the same file on a real trn2.48xlarge

The first layer is split by columns (each rank computes part of the hidden units), the second by rows (the
partial sums are all-reduced), the last by columns again with its output all-gathered. Every rank trains on
the same batch: the batches of all ranks in one, as data parallelism over the same world would see them.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from mlp import arguments, batch, make_model


def main():
    a = arguments()
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron")
    mesh = init_device_mesh("neuron", (world,))
    model = parallelize_module(make_model().to(device), mesh, {
        "0": ColwiseParallel(), "2": RowwiseParallel(), "4": ColwiseParallel(output_layouts=Replicate())})
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    for step in range(a.steps):
        xs, ys = zip(*(batch(r, step, a.batch) for r in range(world)))
        x, y = torch.cat(xs).to(device), torch.cat(ys).to(device)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    weights = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}  # gathered on every rank
    if rank == 0:
        print(f"trained {a.steps} steps tensor-parallel on {world} ranks, last loss {loss.item():.4f}")
    if a.save_all:
        os.makedirs(a.save_all, exist_ok=True)
        torch.save(weights, os.path.join(a.save_all, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
