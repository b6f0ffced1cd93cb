// The pure logic of the cuDNN attention path (kernels/cuda/attention_cudnn.h), on the CPU: the
// impl names and their parsing (model.attention_impl, GDN_ATTENTION), which problems cuDNN is asked
// to run (16-bit, sm_80+, unpacked, D a multiple of 8 up to 128 / 256 on sm_90), which cuDNN
// library can run them (cuDNN 9 opened at run time; a window needs 9.6: the message names the
// version found and the one needed), the choice between cuDNN and the flash kernel (cudnn where it
// cannot run is an error, auto falls back), the graph-cache key (equal for equal graphs, distinct
// for every field a graph is built from, a window >= T as full causal), and that cuDNN's diagonal
// band (key s kept when s <= t and s + w > t) is our window.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/attention_plan.h"
#include "src/ops/attention.h"
#include "src/ops/ops.h"
#include "tests/attention_problem.h"
#include "tests/test_util.h"

namespace gdn::attn {
namespace {

using test::attention_problem;

TEST(AttentionCudnnChoice, ParsesImplNames) {
  EXPECT_EQ(parse_impl(nullptr), Impl::automatic);
  EXPECT_EQ(parse_impl(""), Impl::automatic);
  EXPECT_EQ(parse_impl("auto"), Impl::automatic);
  EXPECT_EQ(parse_impl("cudnn"), Impl::cudnn);
  EXPECT_EQ(parse_impl("flash"), Impl::flash);
  EXPECT_THROW(parse_impl("cuDNN"), std::invalid_argument);
  for (Impl i : {Impl::automatic, Impl::cudnn, Impl::flash}) EXPECT_EQ(parse_impl(impl_name(i)), i);
}

TEST(AttentionCudnnChoice, SupportsSixteenBitUnpackedHeadDimsOnSm80Up) {
  const Problem p = attention_problem(2, 100, 8, 2, 64, 17);
  EXPECT_EQ(cudnn_unsupported(p, SdpaType::bf16, 90), "");
  EXPECT_EQ(cudnn_unsupported(p, SdpaType::f16, 80), "");
  EXPECT_EQ(cudnn_unsupported(p, SdpaType::bf16, 86), "");
  EXPECT_NE(cudnn_unsupported(p, SdpaType::f32, 90), "");
  EXPECT_NE(cudnn_unsupported(p, SdpaType::f64, 90), "");
  EXPECT_NE(cudnn_unsupported(p, SdpaType::bf16, 75), "");
  Problem packed = p;
  packed.B = 1;
  packed.cu_seqlens = {0, 30, 100};
  EXPECT_NE(cudnn_unsupported(packed, SdpaType::bf16, 90), "");
  for (int64_t D = 1; D <= kMaxHeadDim; ++D) {
    const Problem d = attention_problem(1, 10, 2, 1, D);
    EXPECT_EQ(cudnn_unsupported(d, SdpaType::bf16, 80).empty(), D % 8 == 0 && D <= 128) << D;
    EXPECT_EQ(cudnn_unsupported(d, SdpaType::bf16, 90).empty(), D % 8 == 0) << D;
  }
  EXPECT_NE(cudnn_unsupported(attention_problem(1024, 1 << 14, 16, 16, 128), SdpaType::bf16, 90),
            "");
}

LibraryInfo cudnn_library(int version) {
  LibraryInfo info;
  info.name = "cuDNN";
  info.available = version > 0;
  info.version_code = version;
  info.path = version > 0 ? "/lib/libcudnn.so.9" : "";
  info.why = version > 0 ? "" : "libcudnn.so.9: cannot open shared object file";
  return info;
}

TEST(AttentionCudnnChoice, TheLibraryMustBeThereAndNewEnoughForABand) {
  const Problem full = attention_problem(2, 100, 8, 2, 64, 0);
  const Problem band = attention_problem(2, 100, 8, 2, 64, 17);
  EXPECT_EQ(cudnn_library_unsupported(full, cudnn_library(90100)), "");
  EXPECT_EQ(cudnn_library_unsupported(band, cudnn_library(90600)), "");
  EXPECT_EQ(cudnn_library_unsupported(band, cudnn_library(91900)), "");
  const std::string old = cudnn_library_unsupported(band, cudnn_library(90100));
  EXPECT_NE(old.find("window 17"), std::string::npos) << old;
  EXPECT_NE(old.find("needs cuDNN 9.6.0 or newer, found 9.1.0 (/lib/libcudnn.so.9)"),
            std::string::npos)
      << old;
  // A window as long as the sequence is no band: any cuDNN 9 runs it.
  EXPECT_EQ(cudnn_library_unsupported(attention_problem(1, 20, 2, 1, 8, 20), cudnn_library(90100)),
            "");
  for (const Problem& p : {full, band}) {
    const std::string absent = cudnn_library_unsupported(p, cudnn_library(0));
    EXPECT_NE(absent.find("cuDNN is not available (libcudnn.so.9: cannot open shared object file)"),
              std::string::npos)
        << absent;
    EXPECT_NE(absent.find("needs cuDNN 9.0.0 or newer"), std::string::npos) << absent;
    // An explicit cudnn is refused with that reason; auto falls back.
    try {
      run_on_cudnn(Impl::cudnn, absent);
      ADD_FAILURE() << "cudnn without a library did not throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("cuDNN is not available"), std::string::npos);
    }
    EXPECT_FALSE(run_on_cudnn(Impl::automatic, absent));
  }
}

TEST(AttentionCudnnChoice, AutoFallsBackAndCudnnWhereItCannotRunIsAnError) {
  EXPECT_TRUE(run_on_cudnn(Impl::automatic, ""));
  EXPECT_FALSE(run_on_cudnn(Impl::automatic, "packed"));
  EXPECT_TRUE(run_on_cudnn(Impl::cudnn, ""));
  EXPECT_THROW(run_on_cudnn(Impl::cudnn, "packed"), std::invalid_argument);
  EXPECT_FALSE(run_on_cudnn(Impl::flash, ""));
  EXPECT_FALSE(run_on_cudnn(Impl::flash, "packed"));
}

TEST(AttentionCudnnChoice, GraphKeyTellsGraphsApart) {
  const Problem p = attention_problem(2, 100, 8, 2, 64, 17);
  const GraphKey k = graph_key(p, SdpaType::bf16, 0, false);
  EXPECT_EQ(k, graph_key(p, SdpaType::bf16, 0, false));
  std::vector<GraphKey> keys = {k, graph_key(p, SdpaType::bf16, 1, false),
                                graph_key(p, SdpaType::bf16, 0, true),
                                graph_key(p, SdpaType::f16, 0, false)};
  for (int field = 0; field < 7; ++field) {
    Problem q = p;
    if (field == 0) q.B = 3;
    if (field == 1) q.T = 101;
    if (field == 2) q.H = 4;
    if (field == 3) q.HKV = 8;
    if (field == 4) q.D = 128;
    if (field == 5) q.window = 0;
    if (field == 6) q.scale = 0.5;
    keys.push_back(graph_key(q, SdpaType::bf16, 0, false));
  }
  const std::set<GraphKey> distinct(keys.begin(), keys.end());
  EXPECT_EQ(distinct.size(), keys.size());
  // A window as long as the sequence is full causal: the same graph.
  Problem full = p, wide = p;
  full.window = 0;
  wide.window = p.T;
  EXPECT_EQ(band_of(wide), 0);
  EXPECT_EQ(graph_key(full, SdpaType::bf16, 0, false), graph_key(wide, SdpaType::bf16, 0, false));
}

TEST(AttentionCudnnChoice, DiagonalBandIsOurWindow) {
  const int64_t T = 40;
  for (int64_t window : {0, 1, 2, 5, 17, 39, 40, 41}) {
    const Problem p = attention_problem(1, T, 1, 1, 8, window);
    const int64_t band = band_of(p);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t s = 0; s < T; ++s) {
        // cuDNN: causal (top-left, right bound 0) and, with a band w, col + w > row.
        const bool kept = s <= t && (band == 0 || s + band > t);
        EXPECT_EQ(kept, cuda_plan::visible(window, t, s)) << window << " " << t << " " << s;
      }
  }
}

TEST(AttentionCudnnChoice, TheImplOptionDoesNotChangeTheCpuOp) {
  const Problem p = attention_problem(1, 20, 2, 1, 16, 5);
  const Tensor q = ops::randn({p.B, p.T, p.H, p.D}, DType::float32);
  const Tensor k = ops::randn({p.B, p.T, p.HKV, p.D}, DType::float32);
  const Tensor v = ops::randn({p.B, p.T, p.HKV, p.D}, DType::float32);
  ops::AttentionOptions opt;
  opt.window = p.window;
  const Tensor ref = ops::attention(q, k, v, opt);
  for (Impl i : {Impl::cudnn, Impl::flash}) {
    opt.impl = i;
    EXPECT_EQ(ops::attention(q, k, v, opt).to_vector(), ref.to_vector()) << impl_name(i);
  }
}

}  // namespace
}  // namespace gdn::attn
