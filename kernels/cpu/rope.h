// Rotary position embedding on the CPU, non-interleaved ("rotate half", fla / Hugging Face):
// for i < D/2, a = pos * theta^(-2i/D),
//   y_i = x_i cos a - x_{i+D/2} sin a,   y_{i+D/2} = x_{i+D/2} cos a + x_i sin a.
// The inverse (the backward: the rotation is orthogonal, so dx = R(-a) dy) rotates by -a.
//
// Layout: x, y [B, T, H, D], contiguous. Positions: pos = offset + t - start, where start is 0
// (B rows of T tokens) or, with packed sequences (cu_seqlens, B = 1, fla's convention), the first
// token of t's sequence: positions restart at each sequence.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/numeric.h"

namespace gdn::rope {

struct Problem {
  int64_t B = 1, T = 1, H = 1, D = 2;
  double theta = 10000.0;  // rotary base (fla's rope_theta)
  int64_t offset = 0;      // position of the first token (generation: tokens already seen)
  // Packed sequences: N + 1 offsets 0 = cu[0] < ... < cu[N] = T with B = 1; empty: B sequences.
  std::vector<int64_t> cu_seqlens;
};

// Throws std::invalid_argument naming what is wrong: sizes >= 1, D even, theta > 0, offset >= 0,
// cu_seqlens well formed.
void validate(const Problem& p);

// y = R(+a) x (inverse = false) or R(-a) x (inverse = true). T is float, double or bf16; the math
// is in acc_t<T> (fp32, fp64 for double). x and y may be the same buffer.
template <typename T>
void apply_cpu(const Problem& p, const T* x, T* y, bool inverse);

}  // namespace gdn::rope
