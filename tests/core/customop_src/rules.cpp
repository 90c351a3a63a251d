// Kernel functions of `trules`, each breaking one rule of the custom-operator runtime.
#include <torch/torch.h>

torch::Tensor incoherent(const torch::Tensor& x) {  // a write stream while a read stream is open on the tensor
  torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
  auto r = out.read_stream_accessor<float>();
  auto w = out.write_stream_accessor<float>();
  w.write(r.read());
  return out;
}

torch::Tensor tcm_past_end(const torch::Tensor& x) {  // a TCM copy beyond the tensor's elements
  float* buf = (float*)torch::neuron::tcm_malloc(64 * sizeof(float));
  auto in = x.tcm_accessor();
  in.tensor_to_tcm<float>(buf, x.numel() - 4, 8);
  torch::neuron::tcm_free(buf);
  return torch::zeros(x.sizes(), torch::kFloat);
}

torch::Tensor wrong_type(const torch::Tensor& x) {  // an int accessor on a float tensor
  auto in = x.accessor<int32_t, 1>();
  (void)in;
  return torch::zeros(x.sizes(), torch::kFloat);
}

torch::Tensor read_past_end(const torch::Tensor& x) {  // one read more than the stream has
  auto r = x.read_stream_accessor<float>();
  float s = 0;
  for (int64_t i = 0; i <= x.numel(); i++) s += r.read();
  return torch::full(x.sizes(), s, torch::kFloat);
}

torch::Tensor any_kernel(const torch::Tensor& x) { return torch::zeros(x.sizes(), torch::kFloat); }
