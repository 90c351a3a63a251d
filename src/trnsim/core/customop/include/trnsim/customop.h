// The tensor library a Neuron custom C++ operator is written against, as the GpSimd engine runs it:
// the subset of the torch C++ API the Neuron custom-operator reference documents (factories, element-wise
// ops, Tensor, Scalar), the Neuron additions (stream and TCM accessors, get_dst_tensor, get_cpu_id) and
// the registration of NEURON_LIBRARY. trnsim compiles operators with the host compiler against this header
// and runs them on the host; what the reference leaves undefined (a multicore operator using a standard
// accessor, reading past a stream, a TCM copy outside its buffer) is refused here with a named rule.
// Each accessor counts what it moves, so the Python side can time the operator on the GpSimd engine.
//
// C++14, like the device toolchain: an operator that builds here does not rely on newer language features.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace trnsim {

// A rule of the custom-operator runtime, broken: the Python side raises it as a named trnsim error.
struct RuleError : std::runtime_error {
  std::string rule;
  RuleError(std::string r, const std::string& message) : std::runtime_error(message), rule(std::move(r)) {}
};

[[noreturn]] inline void fail(const char* rule, const std::string& message) { throw RuleError(rule, message); }

template <class... A>
std::string str(const A&... parts) {
  std::ostringstream s;
  int unused[] = {0, ((s << parts), 0)...};
  (void)unused;
  return s.str();
}

}  // namespace trnsim

namespace c10 {

// Numbered as in PyTorch; only the dtypes the Neuron reference lists exist.
enum class ScalarType : int8_t { Byte = 0, Char = 1, Short = 2, Int = 3, Half = 5, Float = 6, BFloat16 = 15 };

inline const char* toString(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "Byte";
    case ScalarType::Char: return "Char";
    case ScalarType::Short: return "Short";
    case ScalarType::Int: return "Int";
    case ScalarType::Half: return "Half";
    case ScalarType::Float: return "Float";
    case ScalarType::BFloat16: return "BFloat16";
  }
  return "?";
}

inline size_t elementSize(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: case ScalarType::Char: return 1;
    case ScalarType::Short: case ScalarType::Half: case ScalarType::BFloat16: return 2;
    case ScalarType::Int: case ScalarType::Float: return 4;
  }
  return 0;
}

inline bool isIntegralType(ScalarType t) {
  return t == ScalarType::Byte || t == ScalarType::Char || t == ScalarType::Short || t == ScalarType::Int;
}

namespace detail {
inline float bits_to_float(uint32_t x) { float f; std::memcpy(&f, &x, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t x; std::memcpy(&x, &f, 4); return x; }

inline uint16_t float_to_half(float f) {  // round to nearest even
  uint32_t x = float_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int32_t exp = (int32_t)((x >> 23) & 0xff);
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t m = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u))) m++;
    return (uint16_t)(sign | m);
  }
  uint32_t out = sign | ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) out++;
  return (uint16_t)out;
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float f = std::ldexp((float)mant, -24);
    return sign ? -f : f;
  }
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));
  return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t float_to_bf16(float f) {  // round to nearest even
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
}  // namespace detail

struct Half {
  uint16_t x;
  Half() : x(0) {}
  Half(float f) : x(detail::float_to_half(f)) {}
  operator float() const { return detail::half_to_float(x); }
};

struct BFloat16 {
  uint16_t x;
  BFloat16() : x(0) {}
  BFloat16(float f) : x(detail::float_to_bf16(f)) {}
  operator float() const { return detail::bits_to_float((uint32_t)x << 16); }
};

template <class T> struct TypeOf;
template <> struct TypeOf<uint8_t> { static constexpr ScalarType value = ScalarType::Byte; };
template <> struct TypeOf<int8_t> { static constexpr ScalarType value = ScalarType::Char; };
template <> struct TypeOf<int16_t> { static constexpr ScalarType value = ScalarType::Short; };
template <> struct TypeOf<int32_t> { static constexpr ScalarType value = ScalarType::Int; };
template <> struct TypeOf<Half> { static constexpr ScalarType value = ScalarType::Half; };
template <> struct TypeOf<float> { static constexpr ScalarType value = ScalarType::Float; };
template <> struct TypeOf<BFloat16> { static constexpr ScalarType value = ScalarType::BFloat16; };

class Scalar {
 public:
  template <class T, class = typename std::enable_if<std::is_arithmetic<T>::value>::type>
  Scalar(T v) : d_((double)v), i_((int64_t)v), integral_(std::is_integral<T>::value) {}
  Scalar(Half v) : Scalar((float)v) {}
  Scalar(BFloat16 v) : Scalar((float)v) {}
  template <class T> T to() const { return integral_ ? (T)i_ : (T)d_; }
  double toDouble() const { return integral_ ? (double)i_ : d_; }
  float toFloat() const { return (float)toDouble(); }
  int toInt() const { return integral_ ? (int)i_ : (int)d_; }
  int64_t toLong() const { return integral_ ? i_ : (int64_t)d_; }
  bool isIntegral(bool /*include_bool*/ = false) const { return integral_; }
  bool isFloatingPoint() const { return !integral_; }

 private:
  double d_;
  int64_t i_;
  bool integral_;
};

// Sizes as a value (the port's IntArrayRef): braced lists of any integer type, vectors, another tensor's sizes.
class IntArrayRef {
 public:
  IntArrayRef() {}
  IntArrayRef(std::initializer_list<int64_t> v) : v_(v) {}
  template <class T, class = typename std::enable_if<std::is_integral<T>::value>::type>
  IntArrayRef(std::initializer_list<T> v) : v_(v.begin(), v.end()) {}  // {num_elem} with a size_t num_elem
  IntArrayRef(const std::vector<int64_t>& v) : v_(v) {}
  IntArrayRef(const int64_t* p, size_t n) : v_(p, p + n) {}
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  const int64_t* data() const { return v_.data(); }
  const int64_t* begin() const { return v_.data(); }
  const int64_t* end() const { return v_.data() + v_.size(); }
  int64_t operator[](size_t i) const { return v_[i]; }
  int64_t front() const { return v_.front(); }
  int64_t back() const { return v_.back(); }
  std::vector<int64_t> vec() const { return v_; }
  bool operator==(const IntArrayRef& o) const { return v_ == o.v_; }
  bool operator!=(const IntArrayRef& o) const { return v_ != o.v_; }

 private:
  std::vector<int64_t> v_;
};

struct TensorOptions {
  TensorOptions() {}
  TensorOptions(ScalarType t) : dtype_(t), has_dtype_(true) {}
  TensorOptions dtype(ScalarType t) const { return TensorOptions(t); }
  ScalarType dtype_ = ScalarType::Float;
  bool has_dtype_ = false;
};

}  // namespace c10

namespace torch {
// Accessors cache tensor data in TCM without keeping it coherent with HBM; a tensor's policy says what an
// access that may be incoherent does.
struct CoherencyEnforcer {
  enum Policy { COHERENT, INCOHERENT_VERBOSE, INCOHERENT_QUIET };
};
}  // namespace torch

namespace trnsim {

// What one GpSimd core moved and did during one call; summed and timed by trnsim.core.customop.cost.
struct Stats {
  uint64_t accessor_bytes = 0;     // standard accessor: element by element, straight to HBM
  uint64_t accessor_elements = 0;
  uint64_t stream_bytes = 0;       // performant stream accessors (buffered in TCM)
  uint64_t slow_stream_bytes = 0;  // stream accessors beyond the TCM the pool had: standard-accessor speed
  uint64_t slow_stream_elements = 0;
  uint64_t tcm_bytes = 0;          // tensor_to_tcm / tcm_to_tensor copies
  uint64_t tcm_copies = 0;
  uint64_t library_bytes = 0;      // factories and tensor-library operations, streamed
};

// The 16 KiB of tightly-coupled memory of one GpSimd core, allocated first fit.
struct TcmPool {
  static constexpr size_t kBytes = 16 * 1024;
  static constexpr size_t kAlign = 8;
  alignas(64) unsigned char bytes[kBytes];
  std::vector<std::pair<size_t, size_t>> used;  // (offset, size), sorted by offset

  void* alloc(size_t n) {
    n = (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign;
    size_t at = 0;
    auto it = used.begin();
    for (; it != used.end(); ++it) {
      if (it->first - at >= n) break;
      at = it->first + it->second;
    }
    if (at + n > kBytes) return nullptr;
    used.insert(it, std::make_pair(at, n));
    return bytes + at;
  }
  bool owns(const void* p, size_t n) const {  // [p, p + n) lies inside one allocation
    const unsigned char* c = static_cast<const unsigned char*>(p);
    if (c < bytes || c >= bytes + kBytes) return false;
    size_t off = (size_t)(c - bytes);
    for (auto& u : used)
      if (off >= u.first && off + n <= u.first + u.second) return true;
    return false;
  }
  void release(void* p) {
    if (p == nullptr) return;
    unsigned char* c = static_cast<unsigned char*>(p);
    for (auto it = used.begin(); it != used.end(); ++it)
      if (bytes + it->first == c) { used.erase(it); return; }
    fail("tcm_free", "torch::neuron::tcm_free was given a pointer tcm_malloc did not return (or one already freed)");
  }
};

struct Impl;

// The state of the call in progress: which core, which phase, what it has moved.
struct Context {
  bool shape_phase = false;
  bool multicore = false;
  uint32_t cpu_id = 0, cpu_count = 1;
  std::shared_ptr<Impl> dst;
  bool dst_used = false;
  Stats stats;
  TcmPool tcm;
  int active_streams = 0;
};

inline Context& ctx() {
  static Context c;
  return c;
}

struct Impl {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, strides;
  std::shared_ptr<std::vector<unsigned char>> owned;  // factories' tensors; null when wrapping caller memory
  unsigned char* data = nullptr;                      // null: a shape-function input (no storage yet)
  torch::CoherencyEnforcer::Policy policy = torch::CoherencyEnforcer::COHERENT;
  int read_streams = 0, write_streams = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  size_t nbytes() const { return (size_t)numel() * c10::elementSize(dtype); }
  void set_sizes(const std::vector<int64_t>& s) {
    sizes = s;
    strides.assign(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) strides[i - 1] = strides[i] * s[i];
  }
  unsigned char* bytes(const char* what) const {
    if (data == nullptr)
      fail("shape function", str(what, ": a shape function may not read or write tensor data; its inputs are XLA "
                                      "tensors with no storage yet (use sizes() and numel() only)"));
    return data;
  }
  double get(int64_t i) const;
  void set(int64_t i, double v);
};

inline double Impl::get(int64_t i) const {
  const unsigned char* p = data + (size_t)i * c10::elementSize(dtype);
  switch (dtype) {
    case c10::ScalarType::Byte: return *p;
    case c10::ScalarType::Char: return *reinterpret_cast<const int8_t*>(p);
    case c10::ScalarType::Short: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case c10::ScalarType::Int: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case c10::ScalarType::Half: { uint16_t v; std::memcpy(&v, p, 2); return c10::detail::half_to_float(v); }
    case c10::ScalarType::Float: { float v; std::memcpy(&v, p, 4); return v; }
    case c10::ScalarType::BFloat16: { uint16_t v; std::memcpy(&v, p, 2); return c10::detail::bits_to_float((uint32_t)v << 16); }
  }
  return 0;
}

template <class I>
inline I saturate(double v) {  // integer results: truncated toward zero, clamped to the type's range
  if (std::isnan(v)) return 0;
  double lo = (double)std::numeric_limits<I>::min(), hi = (double)std::numeric_limits<I>::max();
  return (I)std::max(lo, std::min(hi, std::trunc(v)));
}

inline void Impl::set(int64_t i, double v) {
  unsigned char* p = data + (size_t)i * c10::elementSize(dtype);
  switch (dtype) {
    case c10::ScalarType::Byte: *p = saturate<uint8_t>(v); break;
    case c10::ScalarType::Char: *reinterpret_cast<int8_t*>(p) = saturate<int8_t>(v); break;
    case c10::ScalarType::Short: { int16_t x = saturate<int16_t>(v); std::memcpy(p, &x, 2); break; }
    case c10::ScalarType::Int: { int32_t x = saturate<int32_t>(v); std::memcpy(p, &x, 4); break; }
    case c10::ScalarType::Half: { uint16_t x = c10::detail::float_to_half((float)v); std::memcpy(p, &x, 2); break; }
    case c10::ScalarType::Float: { float x = (float)v; std::memcpy(p, &x, 4); break; }
    case c10::ScalarType::BFloat16: { uint16_t x = c10::detail::float_to_bf16((float)v); std::memcpy(p, &x, 2); break; }
  }
}

inline std::shared_ptr<Impl> make_impl(const std::vector<int64_t>& sizes, c10::ScalarType t, bool fill_ones_bits) {
  for (int64_t s : sizes)
    if (s < 0) fail("tensor size", str("a tensor dimension is ", s, "; sizes must be >= 0"));
  auto impl = std::make_shared<Impl>();
  impl->dtype = t;
  impl->set_sizes(sizes);
  impl->owned = std::make_shared<std::vector<unsigned char>>(impl->nbytes(), fill_ones_bits ? 0xff : 0);
  impl->data = impl->owned->data();
  return impl;
}

template <class T>
inline void check_type(const Impl& t, const char* what) {
  if (c10::TypeOf<T>::value != t.dtype)
    fail("accessor dtype", str(what, ": the element type asked for is ", c10::toString(c10::TypeOf<T>::value),
                               " but the tensor holds ", c10::toString(t.dtype)));
}

inline void single_core_only(const char* what) {
  if (ctx().multicore)
    fail("multicore accessor", str(what, " in a multicore operator: with multicore=True every GpSimd core runs the "
                                         "operator at once and only TCM accessors (tcm_accessor) are supported; "
                                         "standard and stream accessors give wrong results on the hardware"));
}

inline void incoherent(const Impl& t, const std::string& what) {
  if (t.policy == torch::CoherencyEnforcer::COHERENT)
    fail("coherence", what + " (the tensor's coherence policy is COHERENT; close the other accessor first, or set "
                             "CoherencyEnforcer::Policy::INCOHERENT_VERBOSE / INCOHERENT_QUIET)");
  if (t.policy == torch::CoherencyEnforcer::INCOHERENT_VERBOSE)
    std::fprintf(stderr, "trnsim: warning: custom operator: %s\n", what.c_str());
}

}  // namespace trnsim

namespace at {

using c10::BFloat16;
using c10::Half;
using c10::IntArrayRef;
using c10::Scalar;
using c10::ScalarType;
using c10::TensorOptions;

constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kChar = ScalarType::Char;
constexpr ScalarType kShort = ScalarType::Short;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;

inline TensorOptions dtype(ScalarType t) { return TensorOptions(t); }

// Element-wise random access; the const overload of Tensor::accessor gives a read-only one.
template <class T, size_t N, bool ReadOnly>
class TensorAccessor {
 public:
  using Elem = typename std::conditional<ReadOnly, const T, T>::type;
  TensorAccessor(Elem* p, const int64_t* sizes, const int64_t* strides) : p_(p), sizes_(sizes), strides_(strides) {}
  TensorAccessor<T, N - 1, ReadOnly> operator[](int64_t i) const {
    bound(i);
    return TensorAccessor<T, N - 1, ReadOnly>(p_ + i * strides_[0], sizes_ + 1, strides_ + 1);
  }
  int64_t size(int64_t d) const { return sizes_[d]; }
  int64_t stride(int64_t d) const { return strides_[d]; }
  IntArrayRef sizes() const { return IntArrayRef(sizes_, N); }
  IntArrayRef strides() const { return IntArrayRef(strides_, N); }

 protected:
  void bound(int64_t i) const {
    if (i < 0 || i >= sizes_[0])
      trnsim::fail("index out of range", trnsim::str("accessor index ", i, " is out of range for a dimension of size ",
                                                     sizes_[0]));
  }
  Elem* p_;
  const int64_t* sizes_;
  const int64_t* strides_;
};

template <class T, bool ReadOnly>
class TensorAccessor<T, 1, ReadOnly> {
 public:
  using Elem = typename std::conditional<ReadOnly, const T, T>::type;
  TensorAccessor(Elem* p, const int64_t* sizes, const int64_t* strides) : p_(p), sizes_(sizes), strides_(strides) {}
  Elem& operator[](int64_t i) const {
    if (i < 0 || i >= sizes_[0])
      trnsim::fail("index out of range", trnsim::str("accessor index ", i, " is out of range for a dimension of size ",
                                                     sizes_[0]));
    trnsim::Stats& s = trnsim::ctx().stats;
    s.accessor_elements += 1;
    s.accessor_bytes += sizeof(T);
    return p_[i * strides_[0]];
  }
  int64_t size(int64_t d) const { return sizes_[d]; }
  int64_t stride(int64_t d) const { return strides_[d]; }
  IntArrayRef sizes() const { return IntArrayRef(sizes_, 1); }
  IntArrayRef strides() const { return IntArrayRef(strides_, 1); }

 private:
  Elem* p_;
  const int64_t* sizes_;
  const int64_t* strides_;
};

class Tensor;

// Sequential access through a 4 KiB TCM buffer: performant while the pool has the buffer (4 at most).
template <class T, bool Write>
class TensorStreamAccessor {
 public:
  TensorStreamAccessor(std::shared_ptr<trnsim::Impl> t) : t_(std::move(t)) {
    trnsim::single_core_only(Write ? "write_stream_accessor" : "read_stream_accessor");
    trnsim::check_type<T>(*t_, Write ? "write_stream_accessor" : "read_stream_accessor");
    t_->bytes(Write ? "write_stream_accessor" : "read_stream_accessor");
    if (Write ? (t_->read_streams || t_->write_streams) : t_->write_streams > 0)
      trnsim::incoherent(*t_, Write ? "a write stream opened on a tensor that has another stream open"
                                    : "a read stream opened on a tensor that has a write stream open");
    (Write ? t_->write_streams : t_->read_streams) += 1;
    buffer_ = trnsim::ctx().tcm.alloc(4096);
    trnsim::ctx().active_streams += 1;
  }
  TensorStreamAccessor(TensorStreamAccessor&& o) noexcept : t_(std::move(o.t_)), pos_(o.pos_), buffer_(o.buffer_) {
    o.t_.reset();
    o.buffer_ = nullptr;
  }
  TensorStreamAccessor(const TensorStreamAccessor&) = delete;
  TensorStreamAccessor& operator=(const TensorStreamAccessor&) = delete;
  ~TensorStreamAccessor() {
    try { close(); } catch (...) {}
  }
  int close() {
    if (!t_) return 0;
    (Write ? t_->write_streams : t_->read_streams) -= 1;
    trnsim::ctx().active_streams -= 1;
    if (buffer_) trnsim::ctx().tcm.release(buffer_);
    buffer_ = nullptr;
    t_.reset();
    return 0;
  }

 protected:
  T* next(const char* what) {
    if (!t_) trnsim::fail("stream closed", trnsim::str(what, " on a closed stream accessor"));
    if (pos_ >= t_->numel())
      trnsim::fail("stream end", trnsim::str(what, " past the end of the stream: the tensor has ", t_->numel(),
                                             " elements"));
    trnsim::Stats& s = trnsim::ctx().stats;
    if (buffer_) {
      s.stream_bytes += sizeof(T);
    } else {
      s.slow_stream_bytes += sizeof(T);
      s.slow_stream_elements += 1;
    }
    return reinterpret_cast<T*>(t_->data) + pos_++;
  }
  std::shared_ptr<trnsim::Impl> t_;
  int64_t pos_ = 0;
  void* buffer_ = nullptr;
};

template <class T>
class TensorReadStreamAccessor : public TensorStreamAccessor<T, false> {
 public:
  using TensorStreamAccessor<T, false>::TensorStreamAccessor;
  T read() { return *this->next("read()"); }
};

template <class T>
class TensorWriteStreamAccessor : public TensorStreamAccessor<T, true> {
 public:
  using TensorStreamAccessor<T, true>::TensorStreamAccessor;
  void write(T value) { *this->next("write()") = value; }
};

// Bulk copies between the tensor in HBM and a buffer from tcm_malloc; the only accessor of multicore operators.
template <bool ReadOnly>
class TensorTcmAccessor {
 public:
  explicit TensorTcmAccessor(std::shared_ptr<trnsim::Impl> t) : t_(std::move(t)) { t_->bytes("tcm_accessor"); }
  template <class T>
  void tensor_to_tcm(T* tcm_ptr, size_t tensor_offset, size_t num_elem) {
    copy<T>(tcm_ptr, tensor_offset, num_elem, "tensor_to_tcm");
    std::memcpy(tcm_ptr, t_->data + tensor_offset * sizeof(T), num_elem * sizeof(T));
  }
  template <class T>
  void tcm_to_tensor(T* tcm_ptr, size_t tensor_offset, size_t num_elem) {
    static_assert(!ReadOnly, "tcm_to_tensor on the TCM accessor of a const Tensor (it is read-only)");
    copy<T>(tcm_ptr, tensor_offset, num_elem, "tcm_to_tensor");
    std::memcpy(t_->data + tensor_offset * sizeof(T), tcm_ptr, num_elem * sizeof(T));
  }

 private:
  template <class T>
  void copy(const T* tcm_ptr, size_t offset, size_t n, const char* what) {
    trnsim::check_type<T>(*t_, what);
    if (offset + n > (size_t)t_->numel())
      trnsim::fail("tcm copy range", trnsim::str(what, ": elements [", offset, ", ", offset + n,
                                                 ") are outside the tensor's ", t_->numel(), " elements"));
    if (n && !trnsim::ctx().tcm.owns(tcm_ptr, n * sizeof(T)))
      trnsim::fail("tcm copy buffer", trnsim::str(what, ": the buffer of ", n * sizeof(T),
                                                  " bytes is not inside one allocation of torch::neuron::tcm_malloc"));
    trnsim::Stats& s = trnsim::ctx().stats;
    s.tcm_bytes += n * sizeof(T);
    s.tcm_copies += 1;
  }
  std::shared_ptr<trnsim::Impl> t_;
};

class Tensor {
 public:
  Tensor() {}
  explicit Tensor(std::shared_ptr<trnsim::Impl> impl) : impl_(std::move(impl)) {}

  int64_t numel() const { return impl().numel(); }
  int64_t dim() const { return (int64_t)impl().sizes.size(); }
  int64_t ndimension() const { return dim(); }
  IntArrayRef sizes() const { return IntArrayRef(impl().sizes); }
  IntArrayRef strides() const { return IntArrayRef(impl().strides); }
  int64_t size(int64_t d) const { return impl().sizes.at((size_t)(d < 0 ? d + dim() : d)); }
  ScalarType scalar_type() const { return impl().dtype; }
  int64_t element_size() const { return (int64_t)c10::elementSize(impl().dtype); }
  size_t nbytes() const { return impl().nbytes(); }
  bool defined() const { return (bool)impl_; }

  template <class T>
  T* data_ptr() const {
    trnsim::check_type<T>(impl(), "data_ptr");
    return reinterpret_cast<T*>(impl().bytes("data_ptr"));
  }

  template <class T, size_t N>
  TensorAccessor<T, N, true> accessor() const& { return make_accessor<T, N, true>(); }
  template <class T, size_t N>
  TensorAccessor<T, N, false> accessor() & { return make_accessor<T, N, false>(); }

  template <class T>
  TensorReadStreamAccessor<T> read_stream_accessor() const& { return TensorReadStreamAccessor<T>(impl_); }
  template <class T>
  TensorWriteStreamAccessor<T> write_stream_accessor() & { return TensorWriteStreamAccessor<T>(impl_); }

  TensorTcmAccessor<true> tcm_accessor() const& { return TensorTcmAccessor<true>(impl_); }
  TensorTcmAccessor<false> tcm_accessor() & { return TensorTcmAccessor<false>(impl_); }

  torch::CoherencyEnforcer::Policy get_accessor_coherence_policy() const { return impl().policy; }
  void set_accessor_coherence_policy(torch::CoherencyEnforcer::Policy p) const { impl_->policy = p; }

  Tensor& fill_(const Scalar& value) const {
    trnsim::Impl& t = *impl_;
    t.bytes("fill_");
    for (int64_t i = 0, n = t.numel(); i < n; i++) t.set(i, value.toDouble());
    trnsim::ctx().stats.library_bytes += t.nbytes();
    return const_cast<Tensor&>(*this);
  }

  trnsim::Impl& impl() const {
    if (!impl_) trnsim::fail("undefined tensor", "use of an undefined (default-constructed) torch::Tensor");
    return *impl_;
  }
  const std::shared_ptr<trnsim::Impl>& shared() const { return impl_; }

 private:
  template <class T, size_t N, bool RO>
  TensorAccessor<T, N, RO> make_accessor() const {
    trnsim::single_core_only("Tensor::accessor");
    trnsim::Impl& t = impl();
    trnsim::check_type<T>(t, "Tensor::accessor");
    if (N != t.sizes.size())
      trnsim::fail("accessor rank", trnsim::str("accessor<", c10::toString(c10::TypeOf<T>::value), ", ", N,
                                                "> on a tensor of ", t.sizes.size(), " dimensions"));
    if (t.read_streams || t.write_streams)
      trnsim::incoherent(t, "a standard accessor used on a tensor that has a stream accessor open");
    return TensorAccessor<T, N, RO>(reinterpret_cast<T*>(t.bytes("Tensor::accessor")), t.sizes.data(),
                                    t.strides.data());
  }
  std::shared_ptr<trnsim::Impl> impl_;
};

// --- factories ----------------------------------------------------------------------------------------

inline ScalarType options_dtype(const TensorOptions& o) {
  if (!o.has_dtype_)
    trnsim::fail("tensor options", "a tensor factory needs its dtype in the options (torch::kFloat, ...): the Neuron "
                                   "tensor library has no default dtype");
  return o.dtype_;
}

inline Tensor empty(IntArrayRef size, TensorOptions options) {
  // uninitialised on the device; all ones bits here (NaN for floats), so a read of an unwritten element shows
  return Tensor(trnsim::make_impl(size.vec(), options_dtype(options), true));
}

inline Tensor full(IntArrayRef size, const Scalar& fill_value, TensorOptions options) {
  Tensor t(trnsim::make_impl(size.vec(), options_dtype(options), false));
  if (t.impl().data) t.fill_(fill_value);
  return t;
}
inline Tensor zeros(IntArrayRef size, TensorOptions options) { return full(size, 0.0, options); }
inline Tensor ones(IntArrayRef size, TensorOptions options) { return full(size, 1.0, options); }
inline Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  Tensor t = zeros({n, m}, options);
  for (int64_t i = 0; i < std::min(n, m); i++) t.impl().set(i * m + i, 1.0);
  return t;
}

// --- operations (no broadcasting: operands have one shape) ------------------------------------------

namespace detail {
inline void same_shape(const Tensor& a, const Tensor& b, const char* op) {
  if (a.impl().sizes != b.impl().sizes)
    trnsim::fail("shape mismatch", trnsim::str(op, ": operands of ", a.numel(), " and ", b.numel(),
                                               " elements with different shapes; the Neuron tensor library does "
                                               "not broadcast"));
}
template <class F>
Tensor& map_out(Tensor& result, const Tensor& self, const char* op, F f) {
  same_shape(result, self, op);
  trnsim::Impl &r = result.impl(), &s = self.impl();
  s.bytes(op);
  r.bytes(op);
  for (int64_t i = 0, n = s.numel(); i < n; i++) r.set(i, f(s.get(i)));
  trnsim::ctx().stats.library_bytes += s.nbytes() + r.nbytes();
  return result;
}
template <class F>
Tensor& zip_out(Tensor& result, const Tensor& a, const Tensor& b, const char* op, F f) {
  same_shape(a, b, op);
  same_shape(result, a, op);
  trnsim::Impl &r = result.impl(), &x = a.impl(), &y = b.impl();
  x.bytes(op);
  y.bytes(op);
  r.bytes(op);
  for (int64_t i = 0, n = x.numel(); i < n; i++) r.set(i, f(x.get(i), y.get(i)));
  trnsim::ctx().stats.library_bytes += x.nbytes() + y.nbytes() + r.nbytes();
  return result;
}
inline Tensor like(const Tensor& t) { return empty(t.sizes(), t.scalar_type()); }
inline void integral(const Tensor& t, const char* op) {
  if (!c10::isIntegralType(t.scalar_type()))
    trnsim::fail("bitwise dtype", trnsim::str(op, " needs an integral tensor; this one holds ",
                                              c10::toString(t.scalar_type())));
}
inline int64_t as_int(double v) { return (int64_t)v; }
}  // namespace detail

#define TRNSIM_UNARY(name, expr)                                                                   \
  inline Tensor& name##_out(Tensor& result, const Tensor& self) {                                  \
    return detail::map_out(result, self, #name, [](double x) { return (double)(expr); });          \
  }                                                                                                \
  inline Tensor name(const Tensor& self) {                                                         \
    Tensor r = detail::like(self);                                                                 \
    return name##_out(r, self);                                                                    \
  }
TRNSIM_UNARY(abs, std::fabs(x))
TRNSIM_UNARY(ceil, std::ceil(x))
TRNSIM_UNARY(floor, std::floor(x))
TRNSIM_UNARY(sin, std::sin(x))
TRNSIM_UNARY(cos, std::cos(x))
TRNSIM_UNARY(tan, std::tan(x))
TRNSIM_UNARY(log, std::log(x))
TRNSIM_UNARY(log2, std::log2(x))
TRNSIM_UNARY(log10, std::log10(x))
TRNSIM_UNARY(exp, std::exp(x))
#undef TRNSIM_UNARY

inline Tensor& pow_out(Tensor& result, const Tensor& self, const Scalar& exponent) {
  double e = exponent.toDouble();
  return detail::map_out(result, self, "pow", [e](double x) { return std::pow(x, e); });
}
inline Tensor& pow_out(Tensor& result, const Scalar& self, const Tensor& exponent) {
  double b = self.toDouble();
  return detail::map_out(result, exponent, "pow", [b](double x) { return std::pow(b, x); });
}
inline Tensor& pow_out(Tensor& result, const Tensor& self, const Tensor& exponent) {
  return detail::zip_out(result, self, exponent, "pow", [](double x, double y) { return std::pow(x, y); });
}
inline Tensor pow(const Tensor& self, const Scalar& exponent) { Tensor r = detail::like(self); return pow_out(r, self, exponent); }
inline Tensor pow(const Scalar& self, const Tensor& exponent) { Tensor r = detail::like(exponent); return pow_out(r, self, exponent); }
inline Tensor pow(const Tensor& self, const Tensor& exponent) { Tensor r = detail::like(self); return pow_out(r, self, exponent); }

inline Tensor& clamp_out(Tensor& result, const Tensor& self, const Scalar& minval, const Scalar& maxval) {
  double lo = minval.toDouble(), hi = maxval.toDouble();
  return detail::map_out(result, self, "clamp", [lo, hi](double x) { return std::min(std::max(x, lo), hi); });
}
inline Tensor clamp(const Tensor& self, const Scalar& minval, const Scalar& maxval) {
  Tensor r = detail::like(self);
  return clamp_out(r, self, minval, maxval);
}

namespace detail {
inline Tensor& arith_out(Tensor& r, const Tensor& s, const Scalar& o, const char* op, double (*f)(double, double, double),
                         double a) {
  double y = o.toDouble();
  return map_out(r, s, op, [y, f, a](double x) { return f(x, y, a); });
}
inline Tensor& arith_out(Tensor& r, const Tensor& s, const Tensor& o, const char* op, double (*f)(double, double, double),
                         double a) {
  return zip_out(r, s, o, op, [f, a](double x, double y) { return f(x, y, a); });
}
inline double add_f(double x, double y, double a) { return x + a * y; }
inline double sub_f(double x, double y, double a) { return x - a * y; }
inline double mul_f(double x, double y, double) { return x * y; }
inline double div_f(double x, double y, double) { return x / y; }
}  // namespace detail

// `other` is a Tensor or a Scalar (any number converts)
template <class O>
Tensor& add_out(Tensor& result, const Tensor& self, const O& other, const Scalar& alpha = 1) {
  return detail::arith_out(result, self, other, "add", detail::add_f, alpha.toDouble());
}
template <class O>
Tensor add(const Tensor& self, const O& other, const Scalar& alpha = 1) {
  Tensor r = detail::like(self);
  return add_out(r, self, other, alpha);
}
template <class O>
Tensor& sub_out(Tensor& result, const Tensor& self, const O& other, const Scalar& alpha = 1) {
  return detail::arith_out(result, self, other, "sub", detail::sub_f, alpha.toDouble());
}
template <class O>
Tensor sub(const Tensor& self, const O& other, const Scalar& alpha = 1) {
  Tensor r = detail::like(self);
  return sub_out(r, self, other, alpha);
}
template <class O>
Tensor& mul_out(Tensor& result, const Tensor& self, const O& other) {
  return detail::arith_out(result, self, other, "mul", detail::mul_f, 1.0);
}
template <class O>
Tensor mul(const Tensor& self, const O& other) {
  Tensor r = detail::like(self);
  return mul_out(r, self, other);
}
template <class O>
Tensor& div_out(Tensor& result, const Tensor& self, const O& other) {
  return detail::arith_out(result, self, other, "div", detail::div_f, 1.0);
}
template <class O>
Tensor div(const Tensor& self, const O& other) {
  Tensor r = detail::like(self);
  return div_out(r, self, other);
}

#define TRNSIM_BITWISE(name, op)                                                                              \
  inline Tensor& name##_out(Tensor& result, const Tensor& self, const Tensor& other) {                        \
    detail::integral(self, #name);                                                                            \
    detail::integral(other, #name);                                                                           \
    return detail::zip_out(result, self, other, #name,                                                        \
                           [](double x, double y) { return (double)(detail::as_int(x) op detail::as_int(y)); }); \
  }                                                                                                           \
  inline Tensor& name##_out(Tensor& result, const Tensor& self, const Scalar& other) {                        \
    detail::integral(self, #name);                                                                            \
    int64_t y = other.toLong();                                                                               \
    return detail::map_out(result, self, #name, [y](double x) { return (double)(detail::as_int(x) op y); });  \
  }                                                                                                           \
  inline Tensor& name##_out(Tensor& result, const Scalar& self, const Tensor& other) {                        \
    return name##_out(result, other, self);                                                                   \
  }                                                                                                           \
  inline Tensor name(const Tensor& self, const Tensor& other) { Tensor r = detail::like(self); return name##_out(r, self, other); } \
  inline Tensor name(const Tensor& self, const Scalar& other) { Tensor r = detail::like(self); return name##_out(r, self, other); } \
  inline Tensor name(const Scalar& self, const Tensor& other) { Tensor r = detail::like(other); return name##_out(r, self, other); }
TRNSIM_BITWISE(bitwise_and, &)
TRNSIM_BITWISE(bitwise_or, |)
#undef TRNSIM_BITWISE

inline Tensor& bitwise_not_out(Tensor& result, const Tensor& self) {
  detail::integral(self, "bitwise_not");
  return detail::map_out(result, self, "bitwise_not", [](double x) { return (double)(~detail::as_int(x)); });
}
inline Tensor bitwise_not(const Tensor& self) {
  Tensor r = detail::like(self);
  return bitwise_not_out(r, self);
}
inline Tensor bitwise_not(Tensor& result, const Tensor& self) { return bitwise_not_out(result, self); }

}  // namespace at

namespace torch {
using namespace at;
namespace neuron {
// The core's 16 KiB TCM pool (stream accessors take 4 KiB each from it); null when it cannot serve the request.
inline void* tcm_malloc(size_t nbytes) { return trnsim::ctx().tcm.alloc(nbytes); }
inline void tcm_free(void* ptr) { trnsim::ctx().tcm.release(ptr); }
}  // namespace neuron
}  // namespace torch

// The operator's output tensor, to write in place (required of multicore operators).
inline torch::Tensor get_dst_tensor() {
  trnsim::Context& c = trnsim::ctx();
  if (c.shape_phase || !c.dst)
    trnsim::fail("get_dst_tensor", "get_dst_tensor() is for a kernel function; a shape function only describes "
                                   "the output");
  c.dst_used = true;
  return torch::Tensor(c.dst);
}
