#ifndef PSTRAIN_COMMON_RECORD_FORMAT_H_
#define PSTRAIN_COMMON_RECORD_FORMAT_H_

#include <cstddef>

// TFRecord framing, as TensorFlow writes it (event files, tf.train.Example
// files). A file is a sequence of records, each:
//
//   uint64  length            little-endian, bytes of data
//   uint32  masked_crc(length) CRC-32C of the 8 length bytes, masked
//   byte    data[length]
//   uint32  masked_crc(data)   CRC-32C of the data, masked
//
// masked_crc(x) = rotate_right(crc32c(x), 15) + 0xa282ead8 (common/crc32c.h).
// A clean end of file falls exactly between records; anything else (a cut
// record, a bad CRC) is damage, reported with the record's offset.

namespace pstrain {
namespace record {

constexpr size_t kLengthSize = 8;
constexpr size_t kCrcSize = 4;
constexpr size_t kHeaderSize = kLengthSize + kCrcSize;
constexpr size_t kFooterSize = kCrcSize;

}  // namespace record
}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RECORD_FORMAT_H_
