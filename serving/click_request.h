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
//   value (but see raw rows below: where the export keeps a CSV schema, an
//   instance without any list is a raw row); absent or [] means no value (as a feature missing from
//   a tf.train.Example). Values are integer ids (>= 0; a bucketed table takes ids in [0, buckets))
//   or strings, hashed as in training: FarmHash Fingerprint64 (data/feature_hash.h), mod buckets
//   for a bucketed table. One feature's values are all ids or all strings within one request.
// - any other key is refused, naming the model's features (a misspelt
//   feature would otherwise predict silently as if it were missing).
//
// A model trained from CSV rows keeps its CSV schema in its export
// (ExportedModel::csv_schema); it also takes raw rows, the columns the CSV
// had, and computes their features exactly as training did (the same
// CsvParser: hashing, log1p, standardization, buckets, defaults, the missing
// rule):
//
//   {"instances": [{"origin": "LAS", "destination": "PHL", "distance": 2176}]}
//
// An instance is a raw row when the export has a schema and none of its
// values is a list (the id form's "dense" is one; send a sparse feature's
// ids as a list, [17], to be read as ids). A raw row's values are the CSV
// fields: a string (the field's text: a multi-valued column's tokens joined
// by its separator; send a hashed column's values as strings, the CSV's
// text), a number (written as its shortest round-trip text: 1.50 is hashed
// as "1.5"), or null (missing, as an absent column is). The label column is ignored if
// present; any other key not a column of the schema is refused, naming the
// columns.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "data/formats/csv_format.h"
#include "data/sparse_features.h"
#include "nlohmann/json.hpp"

namespace pstrain {

// What a click model reads from its instances.
struct ClickInputs {
  int64_t num_dense = 0;              // floats of "dense"
  std::vector<std::string> features;  // Model::sparse_features()
  // The export's CSV schema (AcceptRawRows), or null: raw rows are refused.
  std::shared_ptr<const CsvSchema> schema;
  std::vector<std::string> raw_columns;  // its columns but the label, each once
};

// Makes `inputs` take raw rows read by `schema` (the export's). InvalidArgument
// if the rows it reads are not the inputs (numeric columns other than
// num_dense, a feature no categorical column gives).
absl::Status AcceptRawRows(const CsvSchema& schema, ClickInputs* inputs);

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

// The request of examples a CsvParser built from rows (CSV lines read by
// the export's schema, `inputs.schema`): their dense features and, per model
// feature, the ids of its column.
ClickRequest ClickRequestOfExamples(const Dataset& examples, const ClickInputs& inputs);

// Reads the body of POST /v1/models/<name>:predict for a click model.
// InvalidArgument saying what is wrong and where, ResourceExhausted for more
// than `max_instances`.
absl::Status ReadClickRequest(std::string_view body, const ClickInputs& inputs,
                              int64_t max_instances, ClickRequest* out);

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_CLICK_REQUEST_H_
