// Vendor libraries opened at run time (kernels/dynamic_library.h): a library that is absent says
// why, a present one binds its functions and names those it lacks, versions print as cuDNN and
// NCCL number them, and a feature is refused naming the version found and the one it needs
// (dist.backend nccl without NCCL names the library and suggests MPI). In a CUDA build, cuDNN,
// NVRTC and NCCL as this machine has them are reported consistently.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/dynamic_library.h"
#include "src/dist/nccl_communicator.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/optional_libraries.h"
#endif

namespace gdn {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(DynamicLibrary, AnAbsentLibrarySaysWhyForEachName) {
  DynamicLibrary lib({"libgdn_no_such_library.so.1", "libgdn_nor_this.so.2"});
  EXPECT_FALSE(lib.is_open());
  EXPECT_TRUE(contains(lib.error(), "libgdn_no_such_library.so.1")) << lib.error();
  EXPECT_TRUE(contains(lib.error(), "libgdn_nor_this.so.2")) << lib.error();
  EXPECT_EQ(lib.symbol("cos"), nullptr);
  EXPECT_EQ(lib.path(), "");
}

TEST(DynamicLibrary, BindsWhatItHasAndNamesWhatItLacks) {
  DynamicLibrary lib({"libgdn_no_such_library.so.1", "libm.so.6"});  // the first that opens
  ASSERT_TRUE(lib.is_open()) << lib.error();
  EXPECT_TRUE(contains(lib.path(), "libm.so.6")) << lib.path();
  double (*cosine)(double) = nullptr;
  lib.bind(cosine, "cos");
  ASSERT_NE(cosine, nullptr);
  EXPECT_EQ(cosine(0.0), 1.0);
  EXPECT_TRUE(lib.missing().empty());
  EXPECT_EQ(lib.missing_str(), "");
  void (*none)() = nullptr;
  for (const char* name : {"gdn_a", "gdn_b", "gdn_c", "gdn_d", "gdn_e"}) lib.bind(none, name);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(lib.missing().size(), 5u);
  EXPECT_EQ(lib.missing_str(), "lacks gdn_a, gdn_b, gdn_c and 2 more of the functions gdn calls");
}

TEST(DynamicLibrary, VersionsAndRefusals) {
  EXPECT_EQ(version_string(90600), "9.6.0");
  EXPECT_EQ(version_string(91902), "9.19.2");
  EXPECT_EQ(version_string(22809), "2.28.9");
  LibraryInfo info;
  info.name = "cuDNN";
  info.why = "libcudnn.so.9: cannot open shared object file";
  EXPECT_EQ(info.summary(), "not available: libcudnn.so.9: cannot open shared object file");
  EXPECT_EQ(why_unusable(info, "conv on cuDNN", 90000),
            "cuDNN is not available (libcudnn.so.9: cannot open shared object file); conv on "
            "cuDNN needs cuDNN 9.0.0 or newer");
  info.available = true;
  info.version_code = 90100;
  info.path = "/opt/libcudnn.so.9";
  EXPECT_EQ(info.summary(), "9.1.0 (/opt/libcudnn.so.9)");
  EXPECT_EQ(why_unusable(info, "conv on cuDNN", 90000), "");
  EXPECT_EQ(why_unusable(info, "a window", 90600),
            "a window needs cuDNN 9.6.0 or newer, found 9.1.0 (/opt/libcudnn.so.9)");
}

TEST(DynamicLibrary, NcclBackendWithoutNcclNamesTheLibraryAndSuggestsMpi) {
  LibraryInfo nccl;
  nccl.name = "NCCL";
  nccl.why = "libnccl.so.2: cannot open shared object file";
  const std::string why = dist::nccl_refusal(nccl);
  EXPECT_TRUE(contains(why, "NCCL is not available (libnccl.so.2")) << why;
  EXPECT_TRUE(contains(why, "dist.backend nccl needs NCCL 2.14.0 or newer")) << why;
  EXPECT_TRUE(contains(why, "dist.backend mpi")) << why;
  nccl.available = true;
  nccl.version_code = 21300;
  EXPECT_TRUE(contains(dist::nccl_refusal(nccl), "found 2.13.0")) << dist::nccl_refusal(nccl);
  nccl.version_code = 22809;
  EXPECT_EQ(dist::nccl_refusal(nccl), "");
}

#if defined(GDN_WITH_CUDA)
// What this machine has: each library either available with a version and its file, or not with
// a reason; the same answer every time (opened once).
TEST(DynamicLibrary, ThisMachinesLibrariesAreReportedConsistently) {
  for (const LibraryInfo& info : {cuda::cudnn_info(), cuda::nvrtc_info(), dist::nccl_info()}) {
    SCOPED_TRACE(info.name);
    if (info.available) {
      EXPECT_GT(info.version_code, 0);
      EXPECT_FALSE(info.path.empty());
      EXPECT_TRUE(info.why.empty()) << info.why;
    } else {
      EXPECT_FALSE(info.why.empty());
    }
  }
  EXPECT_EQ(cuda::cudnn_info().summary(), cuda::cudnn_info().summary());
  EXPECT_EQ(cuda::cudnn_missing_for("x", cuda::kCudnnMinVersion).empty(),
            cuda::cudnn_info().available);
}
#endif

}  // namespace
}  // namespace gdn
