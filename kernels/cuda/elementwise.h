// CUDA element-wise kernels: the same contract as kernels/cpu/elementwise.h, with a stream
// (cudaStream_t passed as void*). Pointers are device pointers.
#pragma once
#include <cstdint>

#include "kernels/elementwise_ops.h"

namespace gdn::cuda {

template <typename T>
void unary(kern::Unary op, const T* x, T* y, int64_t n, double alpha, double beta, void* stream);
template <typename T>
void binary(kern::Binary op, const kern::BroadcastLayout& layout, const T* a, const T* b, T* out,
            double alpha, void* stream);
template <typename S, typename D>
void copy_strided(const kern::CopyLayout& layout, const S* src, D* dst, void* stream);
template <typename T>
void axpy(T* dst, const T* src, int64_t n, double alpha, void* stream);
template <typename T>
void fill(T* p, int64_t n, double value, void* stream);
template <typename T>
void random_normal(T* p, int64_t n, uint64_t seed, uint64_t offset, double mean, double std,
                   void* stream);
template <typename T>
void random_uniform(T* p, int64_t n, uint64_t seed, uint64_t offset, double low, double high,
                    void* stream);
template <typename T>
void random_int(T* p, int64_t n, uint64_t seed, uint64_t offset, int64_t low, int64_t high,
                void* stream);

}  // namespace gdn::cuda
