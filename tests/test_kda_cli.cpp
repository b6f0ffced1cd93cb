// `gdn run-kernel --op kda` (the program, run as a child process: the one beside this test's build
// directory, or $GDN_BINARY): on q k v g beta h0 do dht [cu_seqlens].npy every implementation
// writes o ht dq dk dv dg dbeta dh0.npy equal to its kernel's (fp64, 1e-12), packed too; a gdr
// name under --op kda and --residual are refused by name.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "src/io/npy.h"
#include "src/ops/ops.h"
#include "tests/kda_test_data.h"
#include "tests/test_helpers.h"

namespace gdn::kda {
namespace {

using namespace test_data;

struct Exit {
  int code = -1;
  std::string err;
};

Exit run_kernel(const test::TempDir& dir, const std::string& args) {
  const std::string err = dir.file("err.txt");
  const int status = std::system(
      (test::gdn_binary() + " run-kernel --op kda " + args + " >/dev/null 2>" + err).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::read_file(err)};
}

void save(const std::string& path, const Vec& x, const Shape& shape) {
  io::save_npy(path, ops::from_vector(x, shape, DType::float64));
}

Vec load(const std::string& path) {
  return io::load_npy(path).to_vector();
}

TEST(KdaCli, RunKernelWritesTheKernelsOutputsAndGradients) {
  ASSERT_NE(test::gdn_binary(), "") << "no gdn program beside this test's build directory";
  for (bool packed : {false, true}) {
    Problem p = problem(packed ? 1 : 2, 40, 1, 2, 8, 4, 16, Impl::recurrent, true, true,
                        packed ? std::vector<int64_t>{0, 9, 33, 40} : std::vector<int64_t>{});
    const Data d = make_data(p, -3, 21);
    const int64_t N = p.num_seqs();
    test::TempDir dir("gdn_kda_cli");
    const std::string in = dir.file("in");
    std::filesystem::create_directories(in);
    save(in + "/q.npy", d.q, {p.B, p.T, p.H, p.K});
    save(in + "/k.npy", d.k, {p.B, p.T, p.H, p.K});
    save(in + "/v.npy", d.v, {p.B, p.T, p.HV, p.V});
    save(in + "/g.npy", d.g, {p.B, p.T, p.HV, p.K});
    save(in + "/beta.npy", d.beta, {p.B, p.T, p.HV});
    save(in + "/h0.npy", d.h0, {N, p.HV, p.K, p.V});
    save(in + "/do.npy", d.d_o, {p.B, p.T, p.HV, p.V});
    save(in + "/dht.npy", d.dht, {N, p.HV, p.K, p.V});
    if (packed)
      io::save_npy(in + "/cu_seqlens.npy", ops::from_vector({0, 9, 33, 40}, {4}, DType::int32));
    for (const Implementation& impl : implementations()) {
      p.impl = impl.impl;
      const std::string out = dir.file(std::string("out_") + impl.name);
      const Exit r =
          run_kernel(dir, std::string("--impl ") + impl.name +
                              " --dtype float64 --chunk-size 16 --in " + in + " --out " + out);
      ASSERT_EQ(r.code, 0) << r.err;
      const Result want = run_cpu<double>(p, d);
      Result got;
      got.o = load(out + "/o.npy");
      got.ht = load(out + "/ht.npy");
      got.dq = load(out + "/dq.npy");
      got.dk = load(out + "/dk.npy");
      got.dv = load(out + "/dv.npy");
      got.dg = load(out + "/dg.npy");
      got.dbeta = load(out + "/dbeta.npy");
      got.dh0 = load(out + "/dh0.npy");
      expect_close(
          got, want, 1e-12,
          std::string("run-kernel --op kda --impl ") + impl.name + (packed ? " packed" : ""));
    }
  }
}

TEST(KdaCli, RefusesGdrOnlyChoicesByName) {
  ASSERT_NE(test::gdn_binary(), "") << "no gdn program beside this test's build directory";
  test::TempDir dir("gdn_kda_cli_bad");
  Exit r = run_kernel(dir, "--impl fused --in " + dir.path.string() + " --out " + dir.file("o"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unknown implementation 'fused' (known: recurrent, chunked)"),
            std::string::npos)
      << r.err;
  r = run_kernel(dir, "--residual full --in " + dir.path.string() + " --out " + dir.file("o"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--residual applies to --op gdr only"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gdn::kda
