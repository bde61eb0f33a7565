#include "data/stream/bad_records.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain {

absl::Status BadRecords::Skip(const absl::Status& error) {
  const bool data_error = absl::IsDataLoss(error) || absl::IsInvalidArgument(error);
  if (!data_error || skipped_ >= max_bad_records_) {
    if (!data_error || max_bad_records_ == 0) return error;
    return absl::Status(error.code(), absl::StrCat(error.message(), " (max_bad_records ",
                                                   max_bad_records_, " were skipped already)"));
  }
  ++skipped_;
  LOG(WARNING) << "input: skipping bad data (" << skipped_ << " of max_bad_records "
               << max_bad_records_ << "): " << error.message();
  return absl::OkStatus();
}

}  // namespace pstrain
