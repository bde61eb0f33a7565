#ifndef PSTRAIN_TESTING_CLICK_TEST_MODEL_H_
#define PSTRAIN_TESTING_CLICK_TEST_MODEL_H_

// A small click model with values and rows, for serving's tests.

#include <algorithm>
#include <memory>
#include <vector>

#include "data/feature_hash.h"
#include "models/registry.h"

namespace pstrain {

// A click model in miniature: a dense input of 2, a dynamic table of users
// (mean), a bucketed table of tokens (sum), an MLP, and a wide part over users.
inline constexpr char kClickSpec[] = R"(name: tiny_click
input: [2]
head: binary
layers:
  - embedding: {feature: user, dim: 3, dynamic: true, combiner: mean, name: emb_user}
  - embedding: {feature: tokens, dim: 3, buckets: 16, combiner: sum, name: emb_tokens}
  - concat: {input: input, inputs: [emb_user, emb_tokens], name: deep_input}
  - dense: {units: 4, activation: relu}
  - dense: {units: 1, name: deep_logit}
  - linear: {features: [user], dynamic: true, name: wide}
  - add: {input: deep_logit, inputs: [wide], name: logit}
)";

struct ClickModel {
  std::unique_ptr<Model> model;
  std::vector<float> params, state;
  std::vector<TrainedTableRows> tables;
};

// The model with random values, and random rows for some ids of each table.
inline ClickModel MakeClickModel() {
  ClickModel c;
  c.model = *BuildModelFromSpecText(kClickSpec, "the test's spec");
  c.params.resize(c.model->num_params());
  c.state.resize(c.model->num_state());
  c.model->InitializeVariables(5, c.params.data(), c.state.data());
  const std::vector<std::vector<int64_t>> ids = {{5, 17},
                                                 {static_cast<int64_t>(Fingerprint64("a") % 16),
                                                  static_cast<int64_t>(Fingerprint64("b") % 16), 3},
                                                 {5, 17}};
  float v = 0.1f;
  for (size_t t = 0; t < c.model->sparse_tables().size(); ++t) {
    TrainedTableRows rows;
    // Each id once (a token's bucket may be 3 already).
    for (int64_t id : ids[t]) {
      if (std::find(rows.ids.begin(), rows.ids.end(), id) == rows.ids.end()) rows.ids.push_back(id);
    }
    for (size_t k = 0; k < rows.ids.size() * c.model->sparse_tables()[t].dim; ++k) {
      rows.weights.push_back(v);
      v = -v * 1.37f + 0.05f;
    }
    c.tables.push_back(rows);
  }
  return c;
}

// Moves `c` on as training would between two exports, and returns the rows
// of a delta between them (the export format's: a removed row as zeros):
// every dense value changes; in each table the first row changes, the last
// (if there are two or more) is removed, and id 100 + `round` is new.
inline std::vector<TrainedTableRows> MoveOn(ClickModel* c, int round) {
  for (float& p : c->params) p = p * 0.9f + 0.01f * static_cast<float>(round);
  std::vector<TrainedTableRows> delta(c->tables.size());
  for (size_t t = 0; t < c->tables.size(); ++t) {
    TrainedTableRows& rows = c->tables[t];
    const int64_t dim = c->model->sparse_tables()[t].dim;
    const auto add = [&](int64_t id, const float* w) {
      delta[t].ids.push_back(id);
      delta[t].weights.insert(delta[t].weights.end(), w, w + dim);
    };
    if (!rows.ids.empty()) {
      for (int64_t j = 0; j < dim; ++j) rows.weights[j] += 0.25f * static_cast<float>(round);
      add(rows.ids[0], rows.weights.data());
    }
    if (rows.ids.size() >= 2) {
      const std::vector<float> zeros(dim, 0.0f);
      add(rows.ids.back(), zeros.data());
      rows.ids.pop_back();
      rows.weights.resize(rows.ids.size() * dim);
    }
    const int64_t buckets = c->model->sparse_tables()[t].buckets;
    const int64_t id = buckets > 0 ? (100 + round) % buckets : 100 + round;
    if (std::find(rows.ids.begin(), rows.ids.end(), id) == rows.ids.end() &&
        std::find(delta[t].ids.begin(), delta[t].ids.end(), id) == delta[t].ids.end()) {
      rows.ids.push_back(id);
      for (int64_t j = 0; j < dim; ++j) rows.weights.push_back(0.5f - 0.1f * j + 0.01f * round);
      add(id, rows.weights.data() + rows.weights.size() - dim);
    }
  }
  return delta;
}

}  // namespace pstrain

#endif  // PSTRAIN_TESTING_CLICK_TEST_MODEL_H_
