// Shape functions and registration of the test library `tops`.
#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor same_shape(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
torch::Tensor flat_shape(torch::Tensor t) { return torch::zeros({t.numel()}, torch::kFloat); }
torch::Tensor pair_shape(torch::Tensor a, torch::Tensor b) { return torch::zeros(a.sizes(), torch::kFloat); }
torch::Tensor scale_add_shape(torch::Tensor x, double, int64_t) { return torch::zeros(x.sizes(), torch::kFloat); }
torch::Tensor library_ops_shape(torch::Tensor x, torch::Scalar) { return torch::zeros(x.sizes(), torch::kFloat); }
torch::Tensor probe_shape(torch::Tensor) { return torch::zeros({3}, torch::kInt); }
torch::Tensor bf16_shape(torch::Tensor x) { return torch::zeros(x.sizes(), torch::kBFloat16); }
torch::Tensor four_shape(torch::Tensor a, torch::Tensor, torch::Tensor, torch::Tensor) {
  return torch::zeros(a.sizes(), torch::kFloat);
}

NEURON_LIBRARY(tops, m) {
  m.def("negate", &flat_shape, "negate");
  m.def("add_streams", &pair_shape, "add_streams");
  m.def("relu_tcm", &same_shape, "relu_tcm");
  m.def("relu_elementwise", &same_shape, "relu_elementwise");
  m.def("scale_add", &scale_add_shape, "scale_add");
  m.def("library_ops", &library_ops_shape, "library_ops");
  m.def("tcm_probe", &probe_shape, "tcm_probe");
  m.def("bf16_double", &bf16_shape, "bf16_double");
  m.def("five_streams", &four_shape, "five_streams");
}
