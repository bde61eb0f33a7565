#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/hash.h"

namespace pstrain {
namespace {

uint64_t SplitMix(uint64_t* state) { return SplitMix64Next(state); }

}  // namespace

void StandardizeImage(float* image, int64_t n) {
  if (n <= 0) return;
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += image[i];
    squares += static_cast<double>(image[i]) * image[i];
  }
  const double mean = sum / n;
  const double variance = std::max(squares / n - mean * mean, 0.0);
  const double floor = 1.0 / (255.0 * std::sqrt(static_cast<double>(n)));
  const float inv = static_cast<float>(1.0 / std::max(std::sqrt(variance), floor));
  const float m = static_cast<float>(mean);
  for (int64_t i = 0; i < n; ++i) image[i] = (image[i] - m) * inv;
}

void AugmentImage(const Augmentation& a, bool training, int h, int w, int c, uint64_t seed,
                  float* image, float* scratch) {
  const int64_t n = int64_t{h} * w * c;
  if (training && (a.pad > 0 || a.flip)) {
    uint64_t state = seed;
    // Window origin in the padded image, [0, 2 * pad].
    const int dy = a.pad > 0 ? static_cast<int>(SplitMix(&state) % (2 * a.pad + 1)) - a.pad : 0;
    const int dx = a.pad > 0 ? static_cast<int>(SplitMix(&state) % (2 * a.pad + 1)) - a.pad : 0;
    const bool flip = a.flip && (SplitMix(&state) & 1) != 0;
    std::memcpy(scratch, image, n * sizeof(float));
    for (int y = 0; y < h; ++y) {
      const int sy = y + dy;
      for (int x = 0; x < w; ++x) {
        const int sx = (flip ? w - 1 - x : x) + dx;
        float* out = image + (int64_t{y} * w + x) * c;
        if (sy < 0 || sy >= h || sx < 0 || sx >= w) {
          std::fill(out, out + c, 0.0f);
        } else {
          std::memcpy(out, scratch + (int64_t{sy} * w + sx) * c, c * sizeof(float));
        }
      }
    }
  }
  if (a.standardize) StandardizeImage(image, n);
}

}  // namespace pstrain
