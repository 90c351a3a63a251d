#include <torch/torch.h>
#include "torchneuron/register.h"

torch::Tensor same(torch::Tensor t) { return torch::zeros(t.sizes(), torch::kFloat); }
torch::Tensor reads_data(torch::Tensor t) {  // a shape function may not read its inputs' data
  auto a = t.accessor<float, 1>();
  return torch::zeros({(int64_t)a[0]}, torch::kFloat);
}

NEURON_LIBRARY(trules, m) {
  m.def("incoherent", &same, "incoherent");
  m.def("tcm_past_end", &same, "tcm_past_end");
  m.def("wrong_type", &same, "wrong_type");
  m.def("read_past_end", &same, "read_past_end");
  m.def("shape_reads_data", &reads_data, "any_kernel");
}
