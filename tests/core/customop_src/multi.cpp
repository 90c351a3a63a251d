// Kernel functions of the multicore test library `tmulti`: every GpSimd core runs each call.
#include <stdint.h>
#include <torch/torch.h>
#include "neuron/neuron-utils.hpp"

torch::Tensor relu_mc(const torch::Tensor& t_in) {  // each core its share, through TCM, into get_dst_tensor()
  size_t n = t_in.numel();
  torch::Tensor t_out = get_dst_tensor();
  uint32_t id = get_cpu_id(), count = get_cpu_count();
  size_t part = n / count, start = part * id;
  if (id == count - 1) part = n - part * (count - 1);
  static constexpr size_t piece = 1024;
  float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * piece);
  auto in = t_in.tcm_accessor();
  auto out = t_out.tcm_accessor();
  for (size_t i = 0; i < part; i += piece) {
    size_t k = part - i < piece ? part - i : piece;
    in.tensor_to_tcm<float>(buf, start + i, k);
    for (size_t j = 0; j < k; j++) buf[j] = buf[j] > 0.0f ? buf[j] : 0.0f;
    out.tcm_to_tensor<float>(buf, start + i, k);
  }
  torch::neuron::tcm_free(buf);
  return t_out;
}

torch::Tensor core_ids(const torch::Tensor& x) {  // core i writes element i: i, and the core count in slot 8
  torch::Tensor out = get_dst_tensor();
  int32_t* buf = (int32_t*)torch::neuron::tcm_malloc(8);
  buf[0] = (int32_t)get_cpu_id();
  buf[1] = (int32_t)get_cpu_count();
  auto o = out.tcm_accessor();
  o.tcm_to_tensor<int32_t>(buf, get_cpu_id(), 1);
  if (get_cpu_id() == 0) o.tcm_to_tensor<int32_t>(buf + 1, 8, 1);
  torch::neuron::tcm_free(buf);
  return out;
}

torch::Tensor uses_accessor(const torch::Tensor& x) {  // a standard accessor: not in multicore operators
  torch::Tensor out = get_dst_tensor();
  auto o = out.accessor<float, 1>();
  o[0] = 1.0f;
  return out;
}

torch::Tensor returns_tensor(const torch::Tensor& x) {  // no get_dst_tensor(): each core's return is lost
  return torch::zeros(x.sizes(), torch::kFloat);
}
