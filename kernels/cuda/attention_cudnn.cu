// cuDNN's fused attention (kernels/cuda/attention_cudnn.h has the contract and the choice): one
// frontend graph per (host thread, device, GraphKey), built on first use with the heuristics'
// plans (mode A, then the fallback list) and kept; a key whose graph cannot be built is kept too,
// with the reason, so an `auto` call falls back to the flash kernel without retrying. One cuDNN
// handle per (host thread, device, stream). cuDNN is opened at run time (kernels/cuda/cudnn_api.h),
// and the frontend is compiled with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: it binds its functions
// from the same handle (cudnn_frontend::cudnn_dlhandle, defined here) and loads NVRTC itself.
// Without the frontend's headers (GDN_WITH_CUDNN_SDPA off) only the stubs at the end are built:
// every problem is unsupported.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/device_util.cuh"

#if defined(GDN_WITH_CUDNN_SDPA)
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kernels/cuda/cudnn_api.h"

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // the frontend's cuDNN (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING)
}  // namespace cudnn_frontend

namespace gdn::attn {

namespace {

namespace fe = cudnn_frontend;

const cuda::CudnnApi& dnn() {
  return cuda::cudnn("cuDNN's fused attention");
}

// Points the frontend at our cuDNN, once, before its first call. It also opens the CUDA runtime
// by name (libcudart.so.12, then .13): it is told the one this program runs on, unless the user
// named one (CUDNN_FRONTEND_CUDART_LIB_NAME).
void prepare_frontend() {
  static std::once_flag once;
  std::call_once(once, [] {
    fe::cudnn_dlhandle = dnn().handle;
    const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), 0);
  });
}

// The uids of the graphs' tensors (the variant pack's keys).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

cudnnHandle_t handle_for(cudaStream_t stream) {
  return cuda::handle_per_stream<cudnnHandle_t>(stream, [](cudaStream_t s) {
    cudnnHandle_t h = nullptr;
    if (dnn().cudnnCreate(&h) != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error("cudnnCreate failed");
    if (dnn().cudnnSetStream(h, s) != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error("cudnnSetStream failed");
    return h;
  });
}

int current_sm(int device) {
  int major = 0, minor = 0;
  GDN_KCUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GDN_KCUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

// [b, h, s, d] dims over our [B, T, heads, D] memory.
std::vector<int64_t> bhsd_dims(const Problem& p, int64_t heads) {
  return {p.B, heads, p.T, p.D};
}
std::vector<int64_t> bthd_strides(const Problem& p, int64_t heads) {
  return {p.T * heads * p.D, p.D, heads * p.D, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name,
                                                    int64_t uid, const Problem& p, int64_t heads) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(bhsd_dims(p, heads))
                      .set_stride(bthd_strides(p, heads)));
}
void as_output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, int64_t uid,
               const Problem& p, int64_t heads) {
  t->set_output(true).set_uid(uid).set_dim(bhsd_dims(p, heads)).set_stride(bthd_strides(p, heads));
}
// lse [B, H, T] fp32 as cuDNN's stats [b, h, s, 1].
std::shared_ptr<fe::graph::Tensor_attributes> stats_tensor(fe::graph::Graph& g, const Problem& p) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name("stats")
                      .set_uid(kStats)
                      .set_dim({p.B, p.H, p.T, 1})
                      .set_stride({p.H * p.T, p.T, 1, 1})
                      .set_data_type(fe::DataType_t::FLOAT));
}

// Causal (top-left diagonal, right bound 0) and, with a band, the left bound w.
template <typename Attrs>
Attrs& masked(Attrs& a, const Problem& p) {
  a.set_attn_scale(float(p.scale)).set_causal_mask(true);
  if (band_of(p) > 0) a.set_diagonal_band_left_bound(int(band_of(p)));
  return a;
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

void build_forward(fe::graph::Graph& g, const Problem& p) {
  auto q = input(g, "q", kQ, p, p.H), k = input(g, "k", kK, p, p.HKV);
  auto v = input(g, "v", kV, p, p.HKV);
  auto attrs = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true);
  auto [o, stats] = g.sdpa(q, k, v, masked(attrs, p));
  as_output(o, kO, p, p.H);
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({p.B, p.H, p.T, 1})
      .set_stride({p.H * p.T, p.T, 1, 1});
}

void build_backward(fe::graph::Graph& g, const Problem& p) {
  auto q = input(g, "q", kQ, p, p.H), k = input(g, "k", kK, p, p.HKV);
  auto v = input(g, "v", kV, p, p.HKV), o = input(g, "o", kO, p, p.H);
  auto d_o = input(g, "d_o", kDO, p, p.H);
  auto stats = stats_tensor(g, p);
  // Deterministic, as our kernels: no atomics in dQ.
  auto attrs =
      fe::graph::SDPA_backward_attributes().set_name("sdpa_bwd").set_deterministic_algorithm(true);
  auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, d_o, stats, masked(attrs, p));
  as_output(dq, kDQ, p, p.H);
  as_output(dk, kDK, p, p.HKV);
  as_output(dv, kDV, p, p.HKV);
}

struct Entry {
  std::shared_ptr<fe::graph::Graph> graph;  // null: unsupported, `why` says why
  int64_t workspace = 0;
  std::string why;
};

// The frontend's steps, stopping at the first failure (its message in e.why).
Entry build(const Problem& p, bool backward, cudnnHandle_t h) {
  Entry e;
  auto g = new_graph();
  if (backward)
    build_backward(*g, p);
  else
    build_forward(*g, p);
  const auto step = [&](fe::error_t st, const char* what) {
    if (st.is_good()) return true;
    e.why = std::string("cuDNN ") + what + ": " + st.get_message();
    return false;
  };
  if (!step(g->validate(), "validate") ||
      !step(g->build_operation_graph(h), "build_operation_graph") ||
      !step(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
            "create_execution_plans") ||
      !step(g->check_support(h), "check_support") ||
      !step(g->build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans") ||
      !step(g->get_workspace_size(e.workspace), "get_workspace_size"))
    return e;
  e.graph = g;
  return e;
}

// Graphs live as long as the thread; a process that runs very many shapes drops them all past
// kMaxGraphs and starts over.
constexpr size_t kMaxGraphs = 256;

const Entry& entry_for(const Problem& p, bool backward, cudaStream_t stream) {
  int device = 0;
  GDN_KCUDA_CHECK(cudaGetDevice(&device));
  // Never destroyed: no cuDNN descriptor is freed at thread or process exit, after cuDNN's own
  // state may be gone (as conv_cudnn.cu's plans).
  thread_local auto& graphs = *new std::map<GraphKey, Entry>;
  const GraphKey key = graph_key(p, SdpaType::bf16, device, backward);
  auto it = graphs.find(key);
  if (it != graphs.end()) return it->second;
  if (graphs.size() >= kMaxGraphs) graphs.clear();
  Entry e;
  e.why = cudnn_unsupported(p, SdpaType::bf16, current_sm(device));
  if (e.why.empty()) {
    e.why = cudnn_library_unsupported(p, cuda::cudnn_info());
    if (!e.why.empty()) {
      static std::once_flag said;
      std::call_once(said, [&] {
        std::fprintf(stderr, "gdn: attention runs the flash kernel where cuDNN would: %s\n",
                     e.why.c_str());
      });
    }
  }
  if (e.why.empty()) {
    prepare_frontend();
    e = build(p, backward, handle_for(stream));
  }
  return graphs.emplace(key, std::move(e)).first->second;
}

void execute(const Entry& e, std::unordered_map<int64_t, void*>& pack, void* workspace,
             cudaStream_t stream, const char* pass) {
  if (!e.graph)
    throw std::invalid_argument(std::string("attention (cuDNN ") + pass + "): " + e.why);
  fe::error_t st = e.graph->execute(handle_for(stream), pack, workspace);
  if (!st.is_good())
    throw std::runtime_error(std::string("attention (cuDNN ") + pass + "): " + st.get_message());
  GDN_KCUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool cudnn_sdpa_built() {
  return true;
}

int64_t cudnn_workspace_bytes(const Problem& p, bool backward, void* stream, std::string* why) {
  const Entry& e = entry_for(p, backward, static_cast<cudaStream_t>(stream));
  if (why) *why = e.why;
  return e.graph ? e.workspace : -1;
}

void forward_cudnn(const Problem& p, const bf16* q, const bf16* k, const bf16* v, bf16* o,
                   float* lse, void* workspace, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<bf16*>(q)},
                                             {kK, const_cast<bf16*>(k)},
                                             {kV, const_cast<bf16*>(v)},
                                             {kO, o},
                                             {kStats, lse}};
  execute(entry_for(p, false, s), pack, workspace, s, "forward");
}

void backward_cudnn(const Problem& p, const bf16* q, const bf16* k, const bf16* v, const bf16* o,
                    const float* lse, const bf16* d_o, bf16* dq, bf16* dk, bf16* dv,
                    void* workspace, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<bf16*>(q)},
                                             {kK, const_cast<bf16*>(k)},
                                             {kV, const_cast<bf16*>(v)},
                                             {kO, const_cast<bf16*>(o)},
                                             {kStats, const_cast<float*>(lse)},
                                             {kDO, const_cast<bf16*>(d_o)},
                                             {kDQ, dq},
                                             {kDK, dk},
                                             {kDV, dv}};
  execute(entry_for(p, true, s), pack, workspace, s, "backward");
}

}  // namespace gdn::attn

#else  // no frontend headers: the flash kernel runs everything

namespace gdn::attn {

namespace {
constexpr const char* kNotBuilt =
    "built without cuDNN's fused attention (the cuDNN frontend's headers were not found: "
    "GDN_CUDNN_FRONTEND_DIR)";
}

bool cudnn_sdpa_built() {
  return false;
}

int64_t cudnn_workspace_bytes(const Problem&, bool, void*, std::string* why) {
  if (why) *why = kNotBuilt;
  return -1;
}

void forward_cudnn(const Problem&, const bf16*, const bf16*, const bf16*, bf16*, float*, void*,
                   void*) {
  throw std::invalid_argument(std::string("attention: ") + kNotBuilt);
}

void backward_cudnn(const Problem&, const bf16*, const bf16*, const bf16*, const bf16*,
                    const float*, const bf16*, bf16*, bf16*, bf16*, void*, void*) {
  throw std::invalid_argument(std::string("attention: ") + kNotBuilt);
}

}  // namespace gdn::attn

#endif
