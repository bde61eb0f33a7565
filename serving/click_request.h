#ifndef PSTRAIN_SERVING_CLICK_REQUEST_H_
#define PSTRAIN_SERVING_CLICK_REQUEST_H_

// The instances of a click model (a model with embedding tables: Wide & Deep,
// DLRM) as pstrain-serve and pstrain-predict take them:
//
//   {"instances": [{"dense": [0.5, 1.2], "user_id": [17], "tokens": ["a", "b"]},
//                  {"dense": [0.1, 0.0], "user_id": 3}]}
//   {"inputs": {"dense": [[0.5, 1.2], [0.1, 0.0]], "user_id": [[17], 3], ...}}
//
// - "dense": the model's flat input, `num_dense` numbers (any finite value:
//   the model was trained on the data's own scale); required when the model
//   has one, refused when it has none.
// - each sparse feature of the model by name: a list of values or a single
//   value; absent or [] means no value (as a feature missing from a
//   tf.train.Example). Values are integer ids (>= 0; a bucketed table takes
//   ids in [0, buckets)) or strings, hashed as in training: FarmHash
//   Fingerprint64 (data/feature_hash.h), mod buckets for a bucketed table.
//   One feature's values are all ids or all strings within one request.
// - any other key is refused, naming the model's features (a misspelt
//   feature would otherwise predict silently as if it were missing).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "data/sparse_features.h"
#include "nlohmann/json.hpp"

namespace pstrain {

// What a click model reads from its instances.
struct ClickInputs {
  int64_t num_dense = 0;              // floats of "dense"
  std::vector<std::string> features;  // Model::sparse_features()
};

// Instances parsed for a click model's forward pass.
struct ClickRequest {
  bool row = true;  // "instances" (row format) or "inputs" (columnar)
  int64_t n = 0;
  std::vector<float> dense;  // n x num_dense
  SparseBatch sparse;        // one column per feature, n examples each
};

// An empty request (no instances) for `inputs`' columns.
ClickRequest EmptyClickRequest(const ClickInputs& inputs);

// Appends one instance (a JSON object) to `out`, which must come from
// EmptyClickRequest of the same `inputs`. InvalidArgument saying what is
// wrong, prefixed by `where`; `out` is unchanged then.
absl::Status AppendClickInstance(const nlohmann::json& instance, const ClickInputs& inputs,
                                 const std::string& where, ClickRequest* out);

// Reads the body of POST /v1/models/<name>:predict for a click model.
// InvalidArgument saying what is wrong and where, ResourceExhausted for more
// than `max_instances`.
absl::Status ReadClickRequest(std::string_view body, const ClickInputs& inputs,
                              int64_t max_instances, ClickRequest* out);

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_CLICK_REQUEST_H_
