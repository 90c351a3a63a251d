"""A loop whose batch grows every step (a recompilation at the mark_step line), then a value read early."""
import torch
import torch_xla.core.xla_model as xm

dev = xm.xla_device()
w = torch.ones(8, 4, device=dev)
for step in range(3):
    x = torch.ones(2 + step, 8, device=dev)
    y = (x @ w).relu().sum()
    xm.mark_step()
z = (w * 2).sum()
print("z", z.item())
