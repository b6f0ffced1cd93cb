// `gdn run-kernel`: runs one gated-delta-rule implementation (--op kda: one Kimi Delta Attention
// implementation, g [B, T, HV, K]) on .npy inputs (q k v g beta [h0] [cu_seqlens]) and writes o.npy
// ht.npy, and with do.npy [dht.npy] also the gradients. With cu_seqlens.npy (fla's packed
// sequences, B = 1) h0, ht, dht and dh0 have one row per sequence.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "src/autograd/node.h"
#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/io/npy.h"
#include "src/ops/gated_delta_rule.h"
#include "src/ops/kimi_delta_rule.h"
#include "src/ops/ops.h"

namespace gdn::cli {

namespace {

namespace fs = std::filesystem;

Tensor load_input(const fs::path& dir, const std::string& name, bool required) {
  fs::path p = dir / (name + ".npy");
  if (!fs::exists(p)) {
    GDN_CHECK(!required, "missing input ", p.string());
    return Tensor();
  }
  Tensor t = io::load_npy(p.string());
  GDN_CHECK(t.dtype() == DType::float32 || t.dtype() == DType::float64, p.string(),
            ": expected float32 or float64, got ", dtype_name(t.dtype()));
  for (double x : t.to_vector())
    GDN_CHECK(std::isfinite(x), p.string(), ": contains non-finite values");
  return t;
}

// cu_seqlens.npy when present: N + 1 int32 or int64 offsets over the T tokens of the one row.
std::vector<int64_t> load_cu_seqlens(const fs::path& dir, const Tensor& q) {
  const fs::path p = dir / "cu_seqlens.npy";
  if (!fs::exists(p)) return {};
  Tensor t = io::load_npy(p.string());
  GDN_CHECK(t.dtype() == DType::int32 || t.dtype() == DType::int64, p.string(),
            ": cu_seqlens must be int32 or int64, got ", dtype_name(t.dtype()));
  GDN_CHECK(t.dim() == 1, p.string(), ": cu_seqlens must be 1-D [N + 1], got shape ",
            shape_str(t.shape()));
  const std::vector<int64_t> cu = io::integer_values(t);
  try {
    gdr::validate_cu_seqlens(cu, q.size(0), q.size(1));
  } catch (const std::invalid_argument& e) {
    GDN_FAIL(p.string(), ": ", e.what(), " (q.npy is ", shape_str(q.shape()), ")");
  }
  return cu;
}

struct RunKernelArgs {
  std::string op = "gdr", impl = "chunked", device = "cpu", dtype = "float32", in, out;
  std::string residual;  // empty: the implementation's own policy
  int chunk_size = 64;
  double scale = 0;
};

// The Kimi Delta Attention op of --op kda on the loaded tensors: o and ht.
ops::KdaOutput run_kda(const RunKernelArgs& a, const std::vector<int64_t>& cu, const Tensor& q,
                       const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                       const Tensor& h0) {
  ops::KdaOptions opt;
  opt.impl = kda::find_implementation(a.impl).impl;
  opt.chunk_size = a.chunk_size;
  if (a.scale != 0) opt.scale = a.scale;
  opt.output_final_state = true;
  opt.cu_seqlens = cu;
  return ops::kimi_delta_rule(q, k, v, g, beta, opt, h0);
}

void run(const RunKernelArgs& a) {
  GDN_CHECK(a.op == "gdr" || a.op == "kda", "--op must be gdr or kda, got ", a.op);
  const bool kda = a.op == "kda";
  if (kda) {
    GDN_CHECK(a.residual.empty(), "--residual applies to --op gdr only");
    kda::find_implementation(a.impl);  // an unknown name is refused before any file is read
  }
  const Device dev = parse_device(a.device);
  const DType dt = parse_dtype(a.dtype);
  GDN_CHECK(dt == DType::float32 || dt == DType::bfloat16 || dt == DType::float64,
            "--dtype must be float32, bfloat16 or float64, got ", a.dtype);
  const DType acc = dt == DType::float64 ? DType::float64 : DType::float32;
  const DType out_dt = dt == DType::float64 ? DType::float64 : DType::float32;
  ops::GdrOptions opt;
  const bool ssd = !kda && !gdr::find_implementation(a.impl).delta_rule;
  if (!kda) {
    opt.use(gdr::find_implementation(a.impl));
    if (!a.residual.empty()) opt.residual = gdr::parse_residual(a.residual);
  }
  opt.chunk_size = a.chunk_size;
  if (a.scale != 0) opt.scale = a.scale;
  opt.output_final_state = true;

  const fs::path in(a.in), out(a.out);
  GDN_CHECK(fs::is_directory(in), "--in ", a.in, " is not a directory");
  auto prep = [&](const Tensor& t, DType d) {
    return t.defined() ? ops::to_device(ops::cast(t, d), dev) : Tensor();
  };
  Tensor q = prep(load_input(in, "q", true), dt), k = prep(load_input(in, "k", true), dt);
  Tensor v = prep(load_input(in, "v", true), dt), g = prep(load_input(in, "g", true), dt);
  Tensor beta = prep(load_input(in, "beta", !ssd), dt);
  Tensor h0 = prep(load_input(in, "h0", false), acc);
  Tensor d_o = prep(load_input(in, "do", false), dt);
  Tensor dht = prep(load_input(in, "dht", false), acc);
  GDN_CHECK(d_o.defined() || !dht.defined(), "dht.npy given without do.npy");
  GDN_CHECK(q.dim() == 4, "q.npy must be [B, T, H, K], got ", shape_str(q.shape()));
  opt.cu_seqlens = load_cu_seqlens(in, q);

  const bool backward = d_o.defined();
  for (Tensor* t : {&q, &k, &v, &g, &beta, &h0})
    if (backward && t->defined()) t->set_requires_grad(true);
  Tensor o, ht;
  if (kda) {
    const ops::KdaOutput r = run_kda(a, opt.cu_seqlens, q, k, v, g, beta, h0);
    o = r.o;
    ht = r.ht;
  } else {
    const ops::GdrOutput r = ops::gated_delta_rule(q, k, v, g, beta, opt, h0);
    o = r.o;
    ht = r.ht;
  }
  fs::create_directories(out);
  io::save_npy((out / "o.npy").string(), ops::cast(o, out_dt));
  io::save_npy((out / "ht.npy").string(), ops::cast(ht, out_dt));
  if (!backward) return;
  GDN_CHECK(d_o.shape() == o.shape(), "do.npy has shape ", shape_str(d_o.shape()), ", o has ",
            shape_str(o.shape()));
  std::vector<Tensor> roots{o}, seeds{d_o};
  if (dht.defined()) {
    GDN_CHECK(dht.shape() == ht.shape(), "dht.npy has shape ", shape_str(dht.shape()), ", ht has ",
              shape_str(ht.shape()));
    roots.push_back(ht);
    seeds.push_back(dht);
  }
  autograd::run_backward(roots, seeds, false);
  const std::vector<std::pair<std::string, Tensor*>> grads = {
      {"dq", &q}, {"dk", &k}, {"dv", &v}, {"dg", &g}, {"dbeta", &beta}, {"dh0", &h0}};
  for (const auto& [name, t] : grads) {
    if (!t->defined()) continue;
    Tensor gr = t->grad().defined() ? t->grad() : ops::zeros_like(*t);
    io::save_npy((out / (name + ".npy")).string(), ops::cast(gr, out_dt));
  }
}

}  // namespace

void add_run_kernel_command(CLI::App& app) {
  const auto [cmd, args] = add_command<RunKernelArgs>(
      app, "run-kernel",
      "Run one gated-delta-rule (or --op kda: Kimi Delta Attention) kernel on .npy inputs and "
      "write .npy outputs",
      run);
  cmd->add_option("--op", args->op, "gdr (the gated delta rule) or kda (Kimi Delta Attention)")
      ->capture_default_str();
  cmd->add_option("--impl", args->impl,
                  "gdr: " + gdr::implementation_names() + "; kda: " + kda::implementation_names())
      ->capture_default_str();
  cmd->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "float32, bfloat16 or float64")->capture_default_str();
  cmd->add_option("--in", args->in,
                  "directory with q k v g beta [h0 do dht cu_seqlens].npy (cu_seqlens: int32 or "
                  "int64 [N + 1], B = 1; then h0, dht are [N, HV, K, V]; g is [B, T, HV] for "
                  "gdr, [B, T, HV, K] for kda)")
      ->required();
  cmd->add_option("--out", args->out, "directory for o ht [dq dk dv dg dbeta dh0].npy")->required();
  cmd->add_option("--chunk-size", args->chunk_size, "chunk size: 16, 32 or 64")
      ->capture_default_str();
  cmd->add_option("--scale", args->scale, "query scale (default K^-1/2)")->check(nonzero_real());
  cmd->add_option("--residual", args->residual,
                  "minimal or full (gdr chunked; default: the implementation's own)");
}

}  // namespace gdn::cli
