#ifndef PSTRAIN_DATA_FORMATS_IDX_FORMAT_H_
#define PSTRAIN_DATA_FORMATS_IDX_FORMAT_H_

// The idx format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/).
// All integers are big-endian uint32.
//
//   images (idx3): magic 0x00000803, count n, rows, cols, then n*rows*cols
//                  uint8 pixels, row-major, one example after another.
//   labels (idx1): magic 0x00000801, count n, then n uint8 labels.
//
// The magic is 0x00 0x00, a type code (0x08 = uint8) and the number of
// dimensions. Files are usually distributed gzip-compressed (".gz").

#include <cstdint>

namespace pstrain {
namespace idx {

inline constexpr uint32_t kImagesMagic = 0x00000803;
inline constexpr uint32_t kLabelsMagic = 0x00000801;
inline constexpr int kImagesHeaderSize = 16;  // magic, n, rows, cols
inline constexpr int kLabelsHeaderSize = 8;   // magic, n
inline constexpr int kNumClasses = 10;

// File name stems; the split prefix ("train", "t10k") goes in front.
inline constexpr char kImagesSuffix[] = "-images-idx3-ubyte";
inline constexpr char kLabelsSuffix[] = "-labels-idx1-ubyte";
inline constexpr char kTrainPrefix[] = "train";
inline constexpr char kTestPrefix[] = "t10k";

}  // namespace idx
}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_IDX_FORMAT_H_
