#ifndef PSTRAIN_COMMON_ROWS_TO_NAME_H_
#define PSTRAIN_COMMON_ROWS_TO_NAME_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pstrain {

// Rows of an embedding table to name by the raw values behind their ids:
// what the projector (io/projector.h) asks of whoever knows the input
// (data/formats/csv_id_text.h names a CSV column's).
struct RowsToName {
  std::string table;
  // The sparse feature whose values are the rows' ids (a CSV column, an
  // Example's feature); empty for a crossed table or an older checkpoint.
  std::string feature;
  std::vector<int64_t> ids;
  // Filled by the namer, one per id ("" for an id it cannot name); empty:
  // none named.
  std::vector<std::string> texts;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_ROWS_TO_NAME_H_
