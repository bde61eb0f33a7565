#ifndef PSTRAIN_IO_ROW_FILE_CHECK_H_
#define PSTRAIN_IO_ROW_FILE_CHECK_H_

// Checking a row file's bytes, every format version (io/row_checkpoint.h):
// what ParseRowFile does before it hands out a row. Internal to io/.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/row_checkpoint.h"

namespace pstrain {
namespace row_file {

// Bytes of one row in a file of format `version`: id, last step, (from
// version 3) pushes, weights and slots.
int64_t RowBytes(int64_t dim, int64_t slot_floats, uint32_t version);

// A block whose framing and CRCs were checked.
struct CheckedBlock {
  int table = 0;
  int64_t rows = 0;
  size_t offset = 0;  // of its first row in the file
};

// Checks everything in a row file of any version but the rows' values
// (the framing, every CRC, the header, each block against the header, the
// trailer against the blocks), fills `contents`, and returns the blocks in
// file order. Errors as ParseRowFile's; `source` names the file in them.
absl::StatusOr<std::vector<CheckedBlock>> CheckRowFile(std::string_view bytes,
                                                       const std::string& source,
                                                       RowFileContents* contents);

}  // namespace row_file
}  // namespace pstrain

#endif  // PSTRAIN_IO_ROW_FILE_CHECK_H_
