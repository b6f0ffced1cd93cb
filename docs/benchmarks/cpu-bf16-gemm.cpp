// sgemm (OpenBLAS) against a oneDNN bf16 matmul primitive (bf16 x bf16 -> f32) at the default
// model's GEMM shapes, best of 20 each, alternately. Needs libdnnl-dev (not a gdn dependency):
//   g++ -O2 -fopenmp cpu-bf16-gemm.cpp -o bf16-gemm -lopenblas -ldnnl && OMP_NUM_THREADS=1
//   ./bf16-gemm
#include <cblas.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>
using namespace dnnl;
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main() {
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  int shapes[][3] = {{2048, 768, 256}, {2048, 256, 768}, {256, 768, 2048},
                     {2048, 256, 256}, {4096, 256, 768}, {1024, 1024, 1024}};
  for (auto& s : shapes) {
    int M = s[0], N = s[1], K = s[2];
    std::vector<float> A(size_t(M) * K, 0.5f), B(size_t(K) * N, 0.25f), C(size_t(M) * N);
    memory::desc ad({M, K}, memory::data_type::bf16, memory::format_tag::ab),
        bd({K, N}, memory::data_type::bf16, memory::format_tag::ab),
        cd({M, N}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc af({M, K}, memory::data_type::f32, memory::format_tag::ab),
        bfd({K, N}, memory::data_type::f32, memory::format_tag::ab);
    memory am(ad, eng), bm(bd, eng), cm(cd, eng), afm(af, eng, A.data()), bfm(bfd, eng, B.data());
    reorder(afm, am).execute(st, afm, am);
    reorder(bfm, bm).execute(st, bfm, bm);
    auto pd = matmul::primitive_desc(matmul::desc(ad, bd, cd), eng);
    matmul mm(pd);
    double best_s = 1e9, best_b = 1e9;
    for (int r = 0; r < 20; ++r) {
      double t = now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, A.data(), K, B.data(), N,
                  0, C.data(), N);
      best_s = std::min(best_s, now() - t);
      t = now();
      mm.execute(st, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
      st.wait();
      best_b = std::min(best_b, now() - t);
    }
    double f = 2.0 * M * N * K;
    printf("M=%d N=%d K=%d  sgemm %.1f GFLOP/s  bf16 %.1f GFLOP/s  ratio %.2fx  (%s)\n", M, N, K,
           f / best_s / 1e9, f / best_b / 1e9, best_s / best_b, pd.impl_info_str());
  }
}
