"""A small MLP trained data-parallel with torch-xla, written as for a Trn1 instance.

    trnsim torchrun --nproc_per_node=8 examples/train_xla.py            # simulated trn2.48xlarge
    torchrun --nproc_per_node=32 examples/train_xla.py                  # the same file on a real one

Every rank starts from the same weights (one seed) and trains on its own synthetic batches;
xm.optimizer_step averages the gradients over the ranks before each update.
"""
import os

import torch
import torch.distributed as dist
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

from mlp import arguments, batch, make_model  # examples/mlp.py: the model and data the examples share


def main():
    a = arguments()

    dist.init_process_group("xla", init_method="xla://")
    device = xm.xla_device()
    rank, world = xr.global_ordinal(), xr.world_size()
    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.MSELoss()
    for step in range(a.steps):
        x, y = batch(rank, step, a.batch)
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        xm.optimizer_step(opt)
        xm.mark_step()
    xm.master_print(f"trained {a.steps} steps on {world} ranks, last loss {loss.item():.4f}")
    if a.save_all:
        os.makedirs(a.save_all, exist_ok=True)
        xm.save(model.state_dict(), os.path.join(a.save_all, f"rank{rank}.pt"), master_only=False)


if __name__ == "__main__":
    main()
