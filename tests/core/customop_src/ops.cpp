// Kernel functions of the single-core test library `tops`, one per accessor kind and parameter kind.
#include <stdint.h>
#include <torch/torch.h>

torch::Tensor negate(const torch::Tensor& t_in) {  // the standard accessor, element by element
  size_t n = t_in.numel();
  torch::Tensor t_out = torch::zeros({n}, torch::kFloat);
  auto in = t_in.accessor<float, 1>();
  auto out = t_out.accessor<float, 1>();
  for (size_t i = 0; i < n; i++) out[i] = -1 * in[i];
  return t_out;
}

torch::Tensor add_streams(const torch::Tensor& a, const torch::Tensor& b) {  // stream accessors
  torch::Tensor t_out = torch::empty(a.sizes(), torch::kFloat);
  auto ra = a.read_stream_accessor<float>();
  auto rb = b.read_stream_accessor<float>();
  auto w = t_out.write_stream_accessor<float>();
  for (int64_t i = 0; i < a.numel(); i++) w.write(ra.read() + rb.read());
  w.close();
  return t_out;
}

torch::Tensor relu_tcm(const torch::Tensor& t_in) {  // TCM accessors, in 1024-element pieces
  size_t n = t_in.numel();
  torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
  static constexpr size_t piece = 1024;
  float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * piece);
  if (buf != nullptr) {
    auto in = t_in.tcm_accessor();
    auto out = t_out.tcm_accessor();
    for (size_t i = 0; i < n; i += piece) {
      size_t k = n - i < piece ? n - i : piece;
      in.tensor_to_tcm<float>(buf, i, k);
      for (size_t j = 0; j < k; j++) buf[j] = buf[j] > 0.0f ? buf[j] : 0.0f;
      out.tcm_to_tensor<float>(buf, i, k);
    }
  }
  torch::neuron::tcm_free(buf);
  return t_out;
}

torch::Tensor relu_elementwise(const torch::Tensor& t_in) {  // 2-d standard accessors
  torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
  auto in = t_in.accessor<float, 2>();
  auto out = t_out.accessor<float, 2>();
  for (int64_t i = 0; i < t_in.size(0); i++)
    for (int64_t j = 0; j < t_in.size(1); j++) out[i][j] = in[i][j] > 0.0f ? in[i][j] : 0.0f;
  return t_out;
}

torch::Tensor scale_add(const torch::Tensor& x, double scale, int64_t shift) {  // double and int64_t parameters
  torch::Tensor t_out = torch::empty(x.sizes(), torch::kFloat);
  auto in = x.accessor<float, 1>();
  auto out = t_out.accessor<float, 1>();
  for (int64_t i = 0; i < x.numel(); i++) out[i] = (float)(in[i] * scale + shift);
  return t_out;
}

torch::Tensor library_ops(const torch::Tensor& x, torch::Scalar s) {  // the tensor library: exp(x) * s + |x|
  torch::Tensor e = torch::exp(x);
  torch::Tensor m = torch::mul(e, s);
  torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
  torch::add_out(out, m, torch::abs(x));
  return out;
}

torch::Tensor tcm_probe(const torch::Tensor& x) {  // what tcm_malloc gives past the 16 KiB pool
  torch::Tensor out = torch::zeros({3}, torch::kInt);
  auto o = out.accessor<int32_t, 1>();
  void* big = torch::neuron::tcm_malloc(20000);
  void* a = torch::neuron::tcm_malloc(8192);
  void* b = torch::neuron::tcm_malloc(8192);
  void* c = torch::neuron::tcm_malloc(8);
  o[0] = big == nullptr;
  o[1] = a != nullptr && b != nullptr;
  o[2] = c == nullptr;
  torch::neuron::tcm_free(a);
  torch::neuron::tcm_free(b);
  torch::neuron::tcm_free(big);
  return out;
}

torch::Tensor bf16_double(const torch::Tensor& x) {  // bfloat16 elements
  torch::Tensor out = torch::empty(x.sizes(), torch::kBFloat16);
  auto in = x.accessor<c10::BFloat16, 1>();
  auto o = out.accessor<c10::BFloat16, 1>();
  for (int64_t i = 0; i < x.numel(); i++) o[i] = c10::BFloat16(2.0f * (float)in[i]);
  return out;
}

torch::Tensor five_streams(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c,
                           const torch::Tensor& d) {  // the fifth active stream has no TCM buffer left
  torch::Tensor out = torch::empty(a.sizes(), torch::kFloat);
  auto ra = a.read_stream_accessor<float>();
  auto rb = b.read_stream_accessor<float>();
  auto rc = c.read_stream_accessor<float>();
  auto rd = d.read_stream_accessor<float>();
  auto w = out.write_stream_accessor<float>();
  for (int64_t i = 0; i < a.numel(); i++) w.write(ra.read() + rb.read() + rc.read() + rd.read());
  return out;
}
