#ifndef PSTRAIN_DATA_FORMATS_CIFAR10_FORMAT_H_
#define PSTRAIN_DATA_FORMATS_CIFAR10_FORMAT_H_

// The CIFAR-10 binary version (https://www.cs.toronto.edu/~kriz/cifar.html,
// cifar-10-binary.tar.gz). Each batch file is a sequence of fixed-size records
// with no header:
//
//   1 byte label (0..9), then 3072 bytes of pixels in CHW order: 1024 red,
//   1024 green, 1024 blue, each plane 32x32 row-major.
//
// The tarball unpacks into a "cifar-10-batches-bin" directory holding
// data_batch_1.bin .. data_batch_5.bin (10000 records each) and test_batch.bin.

#include <cstdint>

namespace pstrain {
namespace cifar10 {

inline constexpr int kHeight = 32;
inline constexpr int kWidth = 32;
inline constexpr int kChannels = 3;
inline constexpr int kPlaneSize = kHeight * kWidth;
inline constexpr int kImageSize = kPlaneSize * kChannels;
inline constexpr int kRecordSize = 1 + kImageSize;  // 3073
inline constexpr int kNumClasses = 10;
inline constexpr int kNumTrainBatches = 5;

inline constexpr char kSubdir[] = "cifar-10-batches-bin";
inline constexpr char kTrainBatchPrefix[] = "data_batch_";  // + "1".."5" + ".bin"
inline constexpr char kTestBatch[] = "test_batch.bin";

}  // namespace cifar10
}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CIFAR10_FORMAT_H_
