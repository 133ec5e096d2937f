// Branch-free float math for the CPU kernels' vectorized loops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace nmt {

// Always inlined, also into the kernels' CPU clones (GCC inlines a plain function into a clone
// compiled for another architecture only when told to), where it vectorizes.
__attribute__((always_inline)) inline float exp_poly(float x) {
  // Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by a degree-6 polynomial, 2^n by the
  // exponent bits. Branch-free, so loops over it vectorize. Clamped below at -87.3 (2^-126):
  // smaller inputs give about 1e-38 instead of a denormal or 0.
  x = std::min(std::max(x, -87.3f), 88.7f);
  // n = round(x / ln2) by the 1.5 * 2^23 trick: floor() kept GCC from vectorizing the loops.
  // A NaN (which the clamp keeps) takes n = 0 and stays a NaN through r: converting it to an
  // integer would be undefined, and the exponent shift below negative.
  const float finite = x == x ? x : 0.0f;
  const float n = (finite * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return e * scale;
}

// Maximum, sum and dot product of n floats through Lanes partial results, folded in lane order: GCC
// vectorizes the lanes without reordering one float reduction (which it may not do without
// -ffast-math). Always inlined, like exp_poly, so they vectorize inside the CPU clones.
template <int64_t Lanes>
__attribute__((always_inline)) inline float lanes_max(const float* x, int64_t n) {
  const int64_t body = n / Lanes * Lanes;
  float lanes[Lanes];
  for (int64_t l = 0; l < Lanes; ++l) lanes[l] = -__builtin_inff();
  for (int64_t i = 0; i < body; i += Lanes)
    for (int64_t l = 0; l < Lanes; ++l) lanes[l] = std::max(lanes[l], x[i + l]);
  float max = -__builtin_inff();
  for (int64_t l = 0; l < Lanes; ++l) max = std::max(max, lanes[l]);
  for (int64_t i = body; i < n; ++i) max = std::max(max, x[i]);
  return max;
}

template <int64_t Lanes>
__attribute__((always_inline)) inline float lanes_sum(const float* x, int64_t n) {
  const int64_t body = n / Lanes * Lanes;
  float lanes[Lanes] = {};
  for (int64_t i = 0; i < body; i += Lanes)
    for (int64_t l = 0; l < Lanes; ++l) lanes[l] += x[i + l];
  float sum = 0.0f;
  for (int64_t l = 0; l < Lanes; ++l) sum += lanes[l];
  for (int64_t i = body; i < n; ++i) sum += x[i];
  return sum;
}

template <int64_t Lanes>
__attribute__((always_inline)) inline float lanes_dot(const float* a, const float* b, int64_t n) {
  const int64_t body = n / Lanes * Lanes;
  float lanes[Lanes] = {};
  for (int64_t i = 0; i < body; i += Lanes)
    for (int64_t l = 0; l < Lanes; ++l) lanes[l] += a[i + l] * b[i + l];
  float dot = 0.0f;
  for (int64_t l = 0; l < Lanes; ++l) dot += lanes[l];
  for (int64_t i = body; i < n; ++i) dot += a[i] * b[i];
  return dot;
}

}  // namespace nmt
