#ifndef PSTRAIN_DATA_FORMATS_CRITEO_DATASET_H_
#define PSTRAIN_DATA_FORMATS_CRITEO_DATASET_H_

// Criteo click logs (data/formats/criteo_format.h) as a tabular Dataset: what
// LoadDataset returns for a directory holding train.tsv / test.tsv.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/dataset.h"
#include "data/formats/criteo.h"

namespace pstrain {

// The examples of `batch` as a tabular Dataset:
//  - num_dense = 13, dense = CriteoDenseLog1p(batch);
//  - labels 0 or 1;
//  - 26 sparse columns named C1..C26, kind kTokens; an example's value is
//    the Fingerprint64 of the field's text as AppendCriteoLine writes it
//    (8 lowercase hex digits), which is what TensorFlow's
//    to_hash_bucket_fast hashes when it reads the TSV as strings. (A file
//    written in upper case hashes as its lower-case form; Criteo's files are
//    lower case.) A missing field (kCriteoMissingId) has no value.
Dataset CriteoToDataset(const CriteoBatch& batch);

// Appends the examples of `batch`, converted as CriteoToDataset does, to
// `*dataset`, which must be empty or come from CriteoToDataset.
void AppendCriteoBatch(const CriteoBatch& batch, Dataset* dataset);

// The names of the Criteo TSV file of `split`, in the order LoadDataset looks
// for them: train.tsv for kTrain; test.tsv, then eval.tsv for kTest.
std::vector<std::string> CriteoFileNames(Split split);

// The path of the first of CriteoFileNames(split) that exists in `dir`, or ""
// if none does.
std::string FindCriteoFile(Env* env, const std::string& dir, Split split);

// Reads the Criteo TSV file at `path` as CriteoToDataset converts it, in
// chunks, so the parsed columns of the whole file are never held at once.
// The errors of CriteoReader (they name path:line).
absl::StatusOr<Dataset> ReadCriteoDataset(Env* env, const std::string& path);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CRITEO_DATASET_H_
