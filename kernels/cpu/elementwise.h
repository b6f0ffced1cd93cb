// CPU element-wise kernels: unary, broadcasting binary, strided copy with cast, fill, random.
// T is float, double, bf16 or fp16 (computes in acc_t<T>); copies and fills take any dtype.
#pragma once
#include <cstdint>

#include "kernels/elementwise_ops.h"

namespace gdn::cpu {

template <typename T>
void unary(kern::Unary op, const T* x, T* y, int64_t n, double alpha, double beta);

template <typename T>
void binary(kern::Binary op, const kern::BroadcastLayout& layout, const T* a, const T* b, T* out,
            double alpha);

// dst (type D) = src (type S), converted, each read/written through the layout's strides.
template <typename S, typename D>
void copy_strided(const kern::CopyLayout& layout, const S* src, D* dst);

// dst[i] += alpha * src[i] (both contiguous, same type).
template <typename T>
void axpy(T* dst, const T* src, int64_t n, double alpha);

template <typename T>
void fill(T* p, int64_t n, double value);

// Draws of element i use Philox counter (offset + i).
template <typename T>
void random_normal(T* p, int64_t n, uint64_t seed, uint64_t offset, double mean, double std);
template <typename T>
void random_uniform(T* p, int64_t n, uint64_t seed, uint64_t offset, double low, double high);
template <typename T>
void random_int(T* p, int64_t n, uint64_t seed, uint64_t offset, int64_t low, int64_t high);

}  // namespace gdn::cpu
