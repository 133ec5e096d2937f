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
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return e * scale;
}

}  // namespace nmt
