#ifndef PSTRAIN_IO_PNG_H_
#define PSTRAIN_IO_PNG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain {

// PNG through libpng.

// Encodes an 8-bit image as PNG (what TensorBoard's image summaries carry).
// `pixels` are row-major HWC with `channels` 1 (grayscale), 2 (gray +
// alpha), 3 (RGB) or 4 (RGBA). Every row uses filter "none".
absl::StatusOr<std::string> EncodePng(int height, int width, int channels,
                                      absl::Span<const uint8_t> pixels);

// A decoded 8-bit PNG (non-interlaced, bit depth 8, 1-4 channels, any
// filter). Any CRC mismatch, truncation or trailing bytes is DataLoss. For
// tests and inspection.
struct PngImage {
  int height = 0, width = 0, channels = 0;
  std::string pixels;  // HWC
};
absl::StatusOr<PngImage> DecodePng(const std::string& png);

}  // namespace pstrain

#endif  // PSTRAIN_IO_PNG_H_
