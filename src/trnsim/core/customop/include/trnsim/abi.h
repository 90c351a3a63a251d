// The C entry points trnsim calls a built custom-operator library through (ctypes). Included by exactly one
// translation unit of each library, which defines TRNSIM_MULTICORE.
#pragma once
#include <trnsim/registry.h>

extern "C" {

struct TrnsimArg {
  int32_t kind, dtype, ndim, pad;
  const int64_t* sizes;
  void* data;
  double d;
  int64_t i;
};

struct TrnsimOut {
  int32_t dtype, ndim;
  int64_t sizes[16];
  void* data;
  int32_t dst_used, pad;
  uint64_t stats[8];
};

}

namespace trnsim {

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if ((unsigned char)c < 0x20) { out += ' '; continue; }
    out += c;
  }
  return out + "\"";
}

inline std::string registry_json() {
  Registry& r = registry();
  std::string s = str("{\"abi\": 1, \"multicore\": ", TRNSIM_MULTICORE, ", \"libraries\": [");
  for (size_t i = 0; i < r.libraries.size(); i++) s += (i ? ", " : "") + json_string(r.libraries[i]);
  s += "], \"ops\": [";
  for (size_t i = 0; i < r.ops.size(); i++)
    s += str(i ? ", " : "", "{\"name\": ", json_string(r.ops[i].name), ", \"kernel\": ", json_string(r.ops[i].kernel),
             ", \"args\": ", json_string(r.ops[i].shape.kinds), "}");
  s += "], \"kernels\": [";
  for (size_t i = 0; i < r.kernels.size(); i++)
    s += str(i ? ", " : "", "{\"name\": ", json_string(r.kernels[i].name), ", \"args\": ",
             json_string(r.kernels[i].kinds), "}");
  return s + "]}";
}

inline std::shared_ptr<Impl> wrap(int32_t dtype, int32_t ndim, const int64_t* sizes, void* data) {
  auto t = std::make_shared<Impl>();
  t->dtype = (c10::ScalarType)dtype;
  t->set_sizes(std::vector<int64_t>(sizes, sizes + ndim));
  t->data = static_cast<unsigned char*>(data);
  return t;
}

inline void report(const std::string& rule, const std::string& message, char* err, int errlen) {
  std::string text = rule + '\x1f' + message;
  std::snprintf(err, (size_t)errlen, "%s", text.c_str());
}

}  // namespace trnsim

extern "C" __attribute__((visibility("default"))) const char* trnsim_customop_registry() {
  static std::string text = trnsim::registry_json();
  return text.c_str();
}

// One call of operator `op` on one GpSimd core: its shape function (shape_phase) or its kernel function.
// Returns 0, 1 (a rule broken: err holds "rule\x1fmessage") or 2 (another C++ exception).
extern "C" __attribute__((visibility("default"))) int trnsim_customop_call(
    int op, int shape_phase, int cpu_id, int cpu_count, int nargs, const TrnsimArg* args, TrnsimOut* out, char* err,
    int errlen) {
  using namespace trnsim;
  Context& c = ctx();
  c.shape_phase = shape_phase != 0;
  c.multicore = TRNSIM_MULTICORE != 0;
  c.cpu_id = (uint32_t)cpu_id;
  c.cpu_count = (uint32_t)cpu_count;
  c.stats = Stats();
  c.tcm.used.clear();
  c.active_streams = 0;
  c.dst_used = false;
  c.dst.reset();
  try {
    Registry& r = registry();
    const Op& o = r.ops.at((size_t)op);
    const Function* f = &o.shape;
    if (!shape_phase) {
      f = nullptr;
      for (const Function& k : r.kernels)
        if (k.name == o.kernel) f = &k;
      if (f == nullptr) fail("kernel function", str("the kernel function '", o.kernel, "' of operator '", o.name,
                                                    "' is not in the library"));
      c.dst = wrap(out->dtype, out->ndim, out->sizes, out->data);
    }
    std::vector<Arg> values((size_t)nargs);
    for (int i = 0; i < nargs; i++) {
      const TrnsimArg& a = args[i];
      values[i].kind = a.kind;
      values[i].d = a.d;
      values[i].i = a.i;
      if (a.kind == kTensorArg) values[i].t = at::Tensor(wrap(a.dtype, a.ndim, a.sizes, shape_phase ? nullptr : a.data));
    }
    at::Tensor result = f->invoke(f->fn, values);
    if (shape_phase) {
      if (!result.defined()) fail("shape function", str("the shape function of '", o.name, "' returned an undefined tensor"));
      Impl& t = result.impl();
      if (t.sizes.size() > 16) fail("tensor rank", str("the output of '", o.name, "' has ", t.sizes.size(), " dimensions"));
      out->dtype = (int32_t)t.dtype;
      out->ndim = (int32_t)t.sizes.size();
      for (size_t d = 0; d < t.sizes.size(); d++) out->sizes[d] = t.sizes[d];
    } else if (!c.dst_used) {
      Impl& t = result.impl();
      Impl& want = *c.dst;
      if (t.sizes != want.sizes || t.dtype != want.dtype)
        fail("output shape", str("the kernel function '", o.kernel, "' returned a ", c10::toString(t.dtype), " tensor of ",
                                 t.numel(), " elements in ", t.sizes.size(), " dimensions where its shape function "
                                 "gave ", c10::toString(want.dtype), " with ", want.numel(), " elements in ",
                                 want.sizes.size(), " dimensions"));
      std::memcpy(want.data, t.bytes("return value"), t.nbytes());
      c.stats.library_bytes += t.nbytes();
    }
    out->dst_used = c.dst_used ? 1 : 0;
    const Stats& s = c.stats;
    uint64_t counts[8] = {s.accessor_bytes, s.accessor_elements, s.stream_bytes, s.slow_stream_bytes,
                          s.slow_stream_elements, s.tcm_bytes, s.tcm_copies, s.library_bytes};
    std::memcpy(out->stats, counts, sizeof(counts));
    c.dst.reset();
    return 0;
  } catch (const RuleError& e) {
    report(e.rule, e.what(), err, errlen);
  } catch (const std::exception& e) {
    report("exception", str("the operator threw ", e.what()), err, errlen);
  } catch (...) {
    report("exception", "the operator threw an exception that is not a std::exception", err, errlen);
  }
  c.dst.reset();
  return 1;
}
