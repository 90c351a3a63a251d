"""A small MLP trained with torch-xla: four steps lazy, then four with the model under torch.compile(backend="openxla")."""
import torch
import torch_xla
import torch_xla.core.xla_model as xm

torch.manual_seed(0)
device = xm.xla_device()
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.Tanh(), torch.nn.Linear(1024, 256)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(256, 256).to(device), torch.randn(256, 256).to(device)
for forward in (model, torch.compile(model, backend="openxla")):
    for _ in range(4):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(forward(x), y)
        loss.backward()
        opt.step()
        torch_xla.sync()
