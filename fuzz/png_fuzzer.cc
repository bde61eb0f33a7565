// The PNG decoder (libpng underneath): any bytes give an image of consistent
// size or an error.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/png.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<pstrain::PngImage> image =
      pstrain::DecodePng(std::string(reinterpret_cast<const char*>(data), size));
  if (image.ok() &&
      image->pixels.size() != static_cast<size_t>(image->height) * image->width * image->channels) {
    std::abort();
  }
  return 0;
}
