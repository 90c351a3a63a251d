"""A small MLP trained data-parallel on the native `neuron` device, written as for TorchNeuron on Trn2.

    trnsim torchrun --nproc_per_node=2 --instance trn2.48xlarge examples/train_neuron.py
    torchrun --nproc_per_node=32 examples/train_neuron.py              # the same file on a real trn2.48xlarge

Every rank starts from the same weights (one seed) and trains on its own synthetic batches; DDP averages
the gradients over the ranks (backend "neuron") after the compiled forward and backward.
"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from mlp import arguments, batch, make_model  # examples/mlp.py: the model and data the examples share


def main():
    a = arguments()

    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron")
    model = make_model().to(device)
    step_fn = DDP(torch.compile(model, backend="neuron"))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.MSELoss()
    for step in range(a.steps):
        x, y = (t.to(device) for t in batch(rank, step, a.batch))
        opt.zero_grad()
        loss = loss_fn(step_fn(x), y)
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"trained {a.steps} steps on {world} ranks ({torch.accelerator.current_accelerator()}), "
              f"last loss {loss.item():.4f}")
    if a.save_all:
        os.makedirs(a.save_all, exist_ok=True)
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, os.path.join(a.save_all, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
