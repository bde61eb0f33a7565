#ifndef PSTRAIN_TESTING_JOB_DIR_CHECKS_H_
#define PSTRAIN_TESTING_JOB_DIR_CHECKS_H_

// What TensorBoard finds in a trained job dir (issue 54), read as its
// loaders would: through protos with TensorBoard's field numbers and names,
// from the files alone. For the tests that train real jobs.

#include <cstdint>
#include <string>

#include "common/env.h"

namespace pstrain {
namespace testutil {

// The GRAPHS tab: the job dir's events file(s) of run "." carry exactly one
// graph each; its nodes' inputs are nodes; every variable of the newest
// checkpoint is a VariableV2 node of its shape on the ps task that holds its
// first value (the index's shard ranges), feeding one layer on /job:worker;
// every embedding table is a node on /job:ps; there is a loss. Returns the
// number of nodes (0 after a failure).
int64_t ExpectJobGraph(Env* env, const std::string& job_dir);

// The PROJECTOR tab: projector_config.pbtxt names a tensor per table of the
// newest checkpoint that has rows (at most `rows` each), each TSV of its
// shape, each metadata TSV its header and a line per row with the row's
// pushes, most first. For `hash_buckets` > 0, every named row of a table
// with a feature is the hash of its value (HashBucketFast). Returns the
// number of rows named by a value.
int64_t ExpectJobProjector(Env* env, const std::string& job_dir, int64_t rows,
                           int64_t hash_buckets = 0);

// The PR CURVES tab: the number of `tag` tensors in the eval run, each the
// pr_curves plugin's float32 [6, 201] of counts then precision and recall.
int64_t CountPrCurves(Env* env, const std::string& job_dir, const std::string& tag = "pr_curve");

}  // namespace testutil
}  // namespace pstrain

#endif  // PSTRAIN_TESTING_JOB_DIR_CHECKS_H_
