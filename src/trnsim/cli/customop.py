"""The custom C++ operator section of `trnsim demo` (operators are built from a script, through
`torch_neuronx.xla_impl.custom_op`, so there is no command of their own)."""
from __future__ import annotations

KERNELS = """\
#include <torch/torch.h>

torch::Tensor relu_elementwise(const torch::Tensor& x) {   // one HBM access per element
  torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
  auto in = x.accessor<float, 1>();
  auto o = out.accessor<float, 1>();
  for (int64_t i = 0; i < x.numel(); i++) o[i] = in[i] > 0 ? in[i] : 0;
  return out;
}

torch::Tensor relu_tcm(const torch::Tensor& x) {           // 4 KiB pieces through the core's TCM
  torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
  float* buf = (float*)torch::neuron::tcm_malloc(4096);
  auto in = x.tcm_accessor();
  auto o = out.tcm_accessor();
  for (int64_t i = 0; i < x.numel(); i += 1024) {
    int64_t k = x.numel() - i < 1024 ? x.numel() - i : 1024;
    in.tensor_to_tcm<float>(buf, i, k);
    for (int64_t j = 0; j < k; j++) buf[j] = buf[j] > 0 ? buf[j] : 0;
    o.tcm_to_tensor<float>(buf, i, k);
  }
  torch::neuron::tcm_free(buf);
  return out;
}
"""

SHAPES = """\
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor same(torch::Tensor x) { return torch::zeros(x.sizes(), torch::kFloat); }

NEURON_LIBRARY(demo_ops, m) {
  m.def("relu_elementwise", &same, "relu_elementwise");
  m.def("relu_tcm", &same, "relu_tcm");
}
"""


def tour(console) -> None:
    """Two C++ relus built with the host's compiler, run on the GpSimd engine and timed."""
    import os

    import numpy as np

    from trnsim.core import customop
    from trnsim.core.customop import CustomOpBuildError, build

    console.print("A custom C++ operator (torch_neuronx.xla_impl.custom_op) built against trnsim's Neuron tensor "
                  "library, run on the GpSimd engine of a NeuronCore-v2:")
    d = build._default_dir("demo_ops")  # built once, then reused like any custom-op library
    os.makedirs(d, exist_ok=True)
    for name, text in (("kernels.cpp", KERNELS), ("shapes.cpp", SHAPES)):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    try:
        lib = customop.load("demo_ops", [os.path.join(d, "kernels.cpp")], [os.path.join(d, "shapes.cpp")], d)
    except CustomOpBuildError as e:
        console.print(f"  (skipped: {e})")
        return
    x = np.random.default_rng(0).standard_normal(32 * 6144).astype(np.float32)
    console.print(f"  relu of {x.size:,} floats:")
    for op, how in (("relu_elementwise", "element-wise accessor"), ("relu_tcm", "TCM accessor")):
        out, ns = customop.run(lib, op, [x])
        ok = "match numpy" if np.array_equal(out, np.maximum(x, 0)) else "DIFFER from numpy"
        console.print(f"    {how:<22} {ns / 1e6:8.3f} ms on GpSimd, values {ok}")
    console.print("The TCM copy moves 4 KiB per access where the element-wise accessor pays an HBM round trip per "
                  "element (docs/customops.md).")
