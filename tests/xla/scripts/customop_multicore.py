"""A multicore custom relu on the XLA device, its output saved for the test to compare.

    trnsim torchrun customop_multicore.py BUILD_DIR OUT_DIR
"""
import os
import sys

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch_neuronx.xla_impl import custom_op

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "customop")
build_dir, out_dir = sys.argv[1], sys.argv[2]
custom_op.load(name="relu_mc", compute_srcs=[os.path.join(HERE, "relu_mc.cpp")],
               shape_srcs=[os.path.join(HERE, "relu_mc_shape.cpp")], build_directory=build_dir, multicore=True)

device = xm.xla_device()
x = torch.randn(64, 300, generator=torch.Generator().manual_seed(3))
for _ in range(2):
    y = torch.ops.mc_ops.relu_mc(x.to(device) * 2) + 1
    torch_xla.sync()
torch.save({"x": x, "y": y.cpu()}, os.path.join(out_dir, "out.pt"))
