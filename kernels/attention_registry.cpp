// The table of attention implementations (kernels/attention_registry.h): the CPU kernel of
// kernels/cpu/attention.cpp, the CUDA flash kernel of kernels/cuda/attention.cu and cuDNN's fused
// attention of kernels/cuda/attention_cudnn.cu, each behind the entry's Pass signature.
#include "kernels/attention_registry.h"

#include <stdexcept>

#include "kernels/enum_table.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/attention_cuda.h"
#endif

namespace gdn::attn {

namespace {

template <typename T>
acc_t<T>* acc_workspace(const Args<T>& a) {
  return static_cast<acc_t<T>*>(a.workspace);
}

// ---- the CPU kernel
// ------------------------------------------------------------------------------

template <typename T>
void cpu_forward(const Problem& p, const Args<T>& a, void* /*stream*/) {
  forward_cpu<T>(p, a.q, a.k, a.v, a.o, a.lse, acc_workspace(a));
}
template <typename T>
void cpu_backward(const Problem& p, const Args<T>& a, void* /*stream*/) {
  backward_cpu<T>(p, a.q, a.k, a.v, a.o, a.lse, a.d_o, a.dq, a.dk, a.dv, acc_workspace(a));
}
int64_t cpu_workspace(const Problem& p, SdpaType t, bool backward, void*, std::string*) {
  return (backward ? backward_workspace_elems(p) : forward_workspace_elems(p)) * acc_bytes(t);
}

const DeviceKernels& cpu_kernels() {
  static const DeviceKernels k{{{&cpu_forward<float>, &cpu_backward<float>},
                                {&cpu_forward<double>, &cpu_backward<double>},
                                {&cpu_forward<bf16>, &cpu_backward<bf16>}},
                               &cpu_workspace};
  return k;
}

// ---- CUDA: our flash kernel and cuDNN's fused attention -----------------------------------------

#if defined(GDN_WITH_CUDA)
template <typename T>
void flash_forward(const Problem& p, const Args<T>& a, void* stream) {
  forward_cuda<T>(p, a.q, a.k, a.v, a.o, a.lse, acc_workspace(a), stream);
}
template <typename T>
void flash_backward(const Problem& p, const Args<T>& a, void* stream) {
  backward_cuda<T>(p, a.q, a.k, a.v, a.o, a.lse, a.d_o, a.dq, a.dk, a.dv, acc_workspace(a), stream);
}
int64_t flash_workspace(const Problem& p, SdpaType t, bool backward, void*, std::string*) {
  return (backward ? cuda_backward_workspace_elems(p) : cuda_forward_workspace_elems(p)) *
         acc_bytes(t);
}

void cudnn_forward(const Problem& p, const Args<bf16>& a, void* stream) {
  forward_cudnn(p, a.q, a.k, a.v, a.o, a.lse, a.workspace, stream);
}
void cudnn_backward(const Problem& p, const Args<bf16>& a, void* stream) {
  backward_cudnn(p, a.q, a.k, a.v, a.o, a.lse, a.d_o, a.dq, a.dk, a.dv, a.workspace, stream);
}
int64_t cudnn_workspace(const Problem& p, SdpaType t, bool backward, void* stream,
                        std::string* why) {
  std::string reason = std::string("cuDNN's fused attention runs bf16 here, got ") + type_name(t);
  const int64_t bytes =
      t == SdpaType::bf16 ? cudnn_workspace_bytes(p, backward, stream, &reason) : -1;
  if (bytes < 0 && why) *why = reason;
  return bytes;
}
#endif

const DeviceKernels* flash_kernels() {
#if defined(GDN_WITH_CUDA)
  static const DeviceKernels k{{{&flash_forward<float>, &flash_backward<float>},
                                {&flash_forward<double>, &flash_backward<double>},
                                {&flash_forward<bf16>, &flash_backward<bf16>}},
                               &flash_workspace};
  return &k;
#else
  return nullptr;
#endif
}

const DeviceKernels* cudnn_kernels() {
#if defined(GDN_WITH_CUDA)
  static const DeviceKernels k{{{}, {}, {&cudnn_forward, &cudnn_backward}}, &cudnn_workspace};
  return &k;
#else
  return nullptr;
#endif
}

std::vector<Implementation> make_table() {
  return {
      {"attention", Impl::automatic,
       "what ops::attention runs: the CPU kernel; on CUDA cuDNN's fused attention where it "
       "supports the problem, else the flash kernel",
       true, true, &cpu_kernels(), nullptr},
      {"attention_flash", Impl::flash,
       "our CUDA flash kernel (FlashAttention-2 tiles, fp32 math; fp64 for double)", false, true,
       nullptr, flash_kernels()},
      {"attention_cudnn", Impl::cudnn, "cuDNN's fused attention (bf16, unpacked sequences)", false,
       true, nullptr, cudnn_kernels()},
  };
}

std::string join_names(bool (*keep)(const Implementation&)) {
  std::string s;
  for (const Implementation& i : implementations())
    if (keep(i)) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

}  // namespace

int64_t Implementation::residual_elems(const Problem& p) const {
  return p.B * p.H * p.T;
}

double visible_pairs(const Problem& p) {
  double pairs = 0;
  for (int64_t n = 0; n < p.num_seqs(); ++n) {
    const int64_t len = p.packed() ? p.cu_seqlens[size_t(n) + 1] - p.cu_seqlens[size_t(n)] : p.T;
    const double L = double(len);
    if (p.window <= 0 || p.window >= len) {
      pairs += L * (L + 1) / 2;
    } else {
      // queries t < w see t + 1 keys, the others w
      const double w = double(p.window);
      pairs += w * (w + 1) / 2 + (L - w) * w;
    }
  }
  return pairs;
}

// As flash-attention counts them: per head, forward 2 products (Q K^T, P V) and backward 5 (S, dP,
// dV, dQ, dK recomputed or formed), each D multiply-adds (2 FLOPs) per visible pair.
double Implementation::flops(const Problem& p, bool with_backward) const {
  const double per_pair = 2.0 * double(p.D) * (with_backward ? 7.0 : 2.0);  // 2 + 5 products
  return double(p.H) * visible_pairs(p) * per_pair;
}

const std::vector<Implementation>& implementations() {
  static const std::vector<Implementation> table = make_table();
  return table;
}

std::string implementation_names(bool cpu_only) {
  return cpu_only ? join_names([](const Implementation& i) { return i.on_cpu; })
                  : join_names([](const Implementation&) { return true; });
}

std::string cuda_only_names() {
  return join_names([](const Implementation& i) { return !i.on_cpu && i.on_cuda; });
}

bool is_implementation(const std::string& name) {
  for (const Implementation& i : implementations())
    if (name == i.name) return true;
  return false;
}

const Implementation& find_implementation(const std::string& name) {
  for (const Implementation& i : implementations())
    if (name == i.name) return i;
  throw std::invalid_argument("attn: unknown implementation '" + name +
                              "' (known: " + implementation_names() + ")");
}

const Implementation& implementation_of(Impl impl) {
  for (const Implementation& i : implementations())
    if (i.impl == impl) return i;
  throw std::invalid_argument("attn: no implementation for id " + std::to_string(int(impl)));
}

int64_t acc_bytes(SdpaType t) {
  return t == SdpaType::f64 ? 8 : 4;
}

const char* type_name(SdpaType t) {
  static constexpr EnumEntry<SdpaType> kNames[] = {{SdpaType::f32, "float32"},
                                                   {SdpaType::f64, "float64"},
                                                   {SdpaType::bf16, "bfloat16"},
                                                   {SdpaType::f16, "float16"}};
  return EnumTable<SdpaType>(kNames).name(t);
}

CudaPass cuda_pass(const Problem& p, Impl requested, SdpaType t, bool backward, void* stream) {
  const Implementation& flash = implementation_of(Impl::flash);
  const Implementation& cudnn = implementation_of(Impl::cudnn);
  if (!flash.cuda || !cudnn.cuda) throw std::invalid_argument("attn: gdn was built without CUDA");
  CudaPass pass;
  if (requested != Impl::flash) {
    std::string why;
    const int64_t bytes = cudnn.cuda->workspace_bytes(p, t, backward, stream, &why);
    if (bytes < 0) pass.why_not = why;
    if (run_on_cudnn(requested, pass.why_not)) {  // throws for cudnn where it cannot run
      pass.runs = &cudnn;
      pass.workspace_bytes = bytes;
      return pass;
    }
  }
  pass.runs = &flash;
  pass.workspace_bytes = flash.cuda->workspace_bytes(p, t, backward, stream, nullptr);
  return pass;
}

}  // namespace gdn::attn
