#include "io/png.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

// libpng reports errors by longjmp to the setjmp of the call that failed.
// Each setjmp below is in a function whose C++ objects all live from before
// the setjmp to after the libpng calls, and the callbacks hold no objects
// with destructors when they raise an error, so no destructor is skipped.

namespace pstrain {
namespace {

// PNG colour types by channel count.
int ColorType(int channels) {
  switch (channels) {
    case 1:
      return PNG_COLOR_TYPE_GRAY;
    case 2:
      return PNG_COLOR_TYPE_GRAY_ALPHA;
    case 3:
      return PNG_COLOR_TYPE_RGB;
    case 4:
      return PNG_COLOR_TYPE_RGBA;
    default:
      return -1;
  }
}

// What libpng said when it gave up.
struct ErrorState {
  char message[256] = "";
};

void OnError(png_structp png, png_const_charp message) {
  auto* state = static_cast<ErrorState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}

void WriteToString(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), length);
}

void NoFlush(png_structp) {}

// Reads from a byte range; running past its end is an error (a cut file).
struct Reader {
  const char* data;
  size_t size;
  size_t offset = 0;
};

void ReadFromMemory(png_structp png, png_bytep out, png_size_t length) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (length > r->size - r->offset) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, r->data + r->offset, length);
  r->offset += length;
}

}  // namespace

absl::StatusOr<std::string> EncodePng(int height, int width, int channels,
                                      absl::Span<const uint8_t> pixels) {
  if (height <= 0 || width <= 0 || ColorType(channels) < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot encode a ", height, "x", width, "x",
                                                   channels, " image as PNG (1-4 channels)"));
  }
  const size_t row = size_t(width) * channels;
  if (pixels.size() != row * height) {
    return absl::InvalidArgumentError(absl::StrCat("a ", height, "x", width, "x", channels,
                                                   " image needs ", row * height, " bytes, got ",
                                                   pixels.size()));
  }
  std::vector<png_const_bytep> rows(height);
  for (int y = 0; y < height; ++y) rows[y] = pixels.data() + y * row;
  std::string out;
  ErrorState error;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &error, OnError, OnWarning);
  png_infop info = png != nullptr ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    return absl::ResourceExhaustedError("libpng could not allocate an encoder");
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return absl::InternalError(absl::StrCat("libpng could not encode the image: ", error.message));
  }
  png_set_write_fn(png, &out, WriteToString, NoFlush);
  png_set_IHDR(png, info, width, height, 8, ColorType(channels), PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);  // small images: no gain
  png_write_info(png, info);
  png_write_rows(png, const_cast<png_bytepp>(rows.data()), height);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

absl::StatusOr<PngImage> DecodePng(const std::string& bytes) {
  if (bytes.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8) != 0) {
    return absl::DataLossError("not a PNG: the signature is missing");
  }
  PngImage image;
  std::vector<png_bytep> rows;
  Reader reader{bytes.data(), bytes.size()};
  ErrorState error;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &error, OnError, OnWarning);
  png_infop info = png != nullptr ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return absl::ResourceExhaustedError("libpng could not allocate a decoder");
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return absl::DataLossError(absl::StrCat("damaged PNG: ", error.message));
  }
  // Every CRC mismatch, in critical and ancillary chunks alike, and every
  // "benign" error is an error: a damaged file is never half read.
  png_set_crc_action(png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
  png_set_benign_errors(png, 0);
  png_set_read_fn(png, &reader, ReadFromMemory);
  png_read_info(png, info);
  if (png_get_bit_depth(png, info) != 8 ||
      png_get_interlace_type(png, info) != PNG_INTERLACE_NONE ||
      png_get_color_type(png, info) == PNG_COLOR_TYPE_PALETTE) {
    png_error(png, "only 8-bit, non-interlaced gray, gray+alpha, RGB or RGBA images are read");
  }
  image.height = static_cast<int>(png_get_image_height(png, info));
  image.width = static_cast<int>(png_get_image_width(png, info));
  image.channels = png_get_channels(png, info);
  const size_t row = png_get_rowbytes(png, info);
  if (image.height <= 0 || image.width <= 0 || row != size_t(image.width) * image.channels ||
      static_cast<uint64_t>(row) * image.height > (uint64_t{1} << 30)) {
    png_error(png, "image size out of range");
  }
  image.pixels.resize(row * image.height);
  rows.resize(image.height);
  for (int y = 0; y < image.height; ++y) {
    rows[y] = reinterpret_cast<png_bytep>(image.pixels.data()) + y * row;
  }
  png_read_image(png, rows.data());
  png_read_end(png, info);
  if (reader.offset != bytes.size()) png_error(png, "bytes after the IEND chunk");
  png_destroy_read_struct(&png, &info, nullptr);
  return image;
}

}  // namespace pstrain
