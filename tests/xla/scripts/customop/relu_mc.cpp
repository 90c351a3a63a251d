// The relu on all 8 GpSimd cores: each its share of the elements, through TCM, into get_dst_tensor().
#include <torch/torch.h>
#include "neuron/neuron-utils.hpp"

torch::Tensor relu_mc(const torch::Tensor& t_in) {
  size_t n = t_in.numel();
  torch::Tensor t_out = get_dst_tensor();
  uint32_t id = get_cpu_id(), count = get_cpu_count();
  size_t part = n / count, start = part * id;
  if (id == count - 1) part = n - part * (count - 1);
  float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * 512);
  auto in = t_in.tcm_accessor();
  auto out = t_out.tcm_accessor();
  for (size_t i = 0; i < part; i += 512) {
    size_t k = part - i < 512 ? part - i : 512;
    in.tensor_to_tcm<float>(buf, start + i, k);
    for (size_t j = 0; j < k; j++) buf[j] = buf[j] > 0.0f ? buf[j] : 0.0f;
    out.tcm_to_tensor<float>(buf, start + i, k);
  }
  torch::neuron::tcm_free(buf);
  return t_out;
}
