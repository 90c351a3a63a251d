"""A weight made on the device that is larger than one Trn1 NeuronCore's 16 GiB of HBM (never materialized)."""
import torch
import torch_xla.core.xla_model as xm

dev = xm.xla_device()
layer = torch.nn.Linear(65536, 98304, bias=False, device=dev)  # 24 GiB of fp32
xm.mark_step()
