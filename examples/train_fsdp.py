"""The MLP of examples/mlp.py trained with FSDP2 (fully_shard) on the native `neuron` device.

    trnsim torchrun --nproc_per_node=2 --instance trn2.48xlarge examples/train_fsdp.py
    torchrun --nproc_per_node=32 examples/train_fsdp.py                # the same file on a real trn2.48xlarge

Each linear layer is a unit of its own: its weights live sharded over the ranks, are all-gathered before its
forward and backward and freed after, and its gradients are reduce-scattered (averaged) back to the shards.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

from mlp import arguments, batch, make_model


def main():
    a = arguments()
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron")
    model = make_model().to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    for step in range(a.steps):
        x, y = (t.to(device) for t in batch(rank, step, a.batch))
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    weights = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}  # gathered on every rank
    if rank == 0:
        print(f"trained {a.steps} steps with FSDP2 on {world} ranks, last loss {loss.item():.4f}")
    if a.save_all:
        os.makedirs(a.save_all, exist_ok=True)
        torch.save(weights, os.path.join(a.save_all, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
