#ifndef PSTRAIN_DATA_STREAM_FILE_PATTERN_H_
#define PSTRAIN_DATA_STREAM_FILE_PATTERN_H_

// Input files named as tf.data's Dataset.list_files names them: a glob, or a
// comma-separated list of paths and globs, local or gs://
// ("gs://bucket/criteo/day_*.tsv.gz", "train-*-of-00064.tfrecord.gz").

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

// True when `pattern` has a glob character (*, ? or [) and so names the
// files that match it rather than one file.
bool IsGlob(std::string_view pattern);

// The files `patterns` names, through `env`: each comma-separated entry is
// a path, or a glob whose *, ? and [...] match within one path component
// (any component: "logs/*/part-*"), expanded in name order; entries in the
// order given, a file named twice kept once, at its first place. Names
// starting with '.' match only a pattern component that starts with '.'
// (files being written: ".part-3.tmp"). NotFound naming `what` (the key or
// flag, "training.train_files") and the entry for an entry that matches no
// file, or a path that does not exist; InvalidArgument for no entry at all.
absl::StatusOr<std::vector<std::string>> ExpandFilePatterns(Env* env, std::string_view patterns,
                                                            std::string_view what);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_FILE_PATTERN_H_
