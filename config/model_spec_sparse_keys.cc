// The keys of the sparse layers (embedding, linear): features, crosses,
// buckets and sequences, whose names and lists have rules of their own.
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/config_yaml_util.h"
#include "config/model_spec_keys_internal.h"
#include "config/model_spec_types.h"

namespace pstrain {
namespace model_spec_internal {

using config_internal::Sv;

// A whole number in [1, kMaxBuckets], written only when the table is not
// dynamic.
KeySpec BucketsKey() {
  return Key(
      "buckets", "none",
      absl::StrCat("a whole number in [1, ", kMaxBuckets,
                   "]: a table of rows [0, buckets) (ids as they are, strings hashed as "
                   "tf.strings.to_hash_bucket_fast); exactly one of buckets and dynamic: true"),
      [](const std::string& text, LayerSpec* layer) -> std::string {
        int64_t v = 0;
        if (!absl::SimpleAtoi(Sv(text), &v)) return "is a whole number";
        if (v < 1 || v > kMaxBuckets) return absl::StrCat("must be in [1, ", kMaxBuckets, "]");
        layer->buckets = v;
        return "";
      },
      [](const LayerSpec& layer) { return absl::StrCat(layer.buckets); }, nullptr,
      [](const LayerSpec& layer) { return !layer.dynamic; });
}

// A sparse feature's name.
KeySpec FeatureKey() {
  return Key(
      "feature", "",
      "the name of the sparse feature whose ids it looks up (Criteo's C1 .. C26, an "
      "Example's key): letters, digits, _ - . and /",
      [](const std::string& text, LayerSpec* layer) -> std::string {
        if (!ValidName(text)) {
          return "is a feature's name: letters, digits, _ - . and / (not leading, trailing "
                 "or doubled), at most 128";
        }
        layer->feature = text;
        return "";
      },
      [](const LayerSpec& layer) { return config_internal::Quoted(layer.feature); });
}

// linear's features: a non-empty list of distinct names.
KeySpec FeaturesKey() {
  return Key(
      "features", "", "a list of the sparse features' names, e.g. [C1, C2], non-empty and distinct",
      nullptr,
      [](const LayerSpec& layer) {
        std::vector<std::string> quoted;
        for (const std::string& f : layer.features) quoted.push_back(config_internal::Quoted(f));
        return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
      },
      [](const std::vector<std::string>& items, LayerSpec* layer) -> std::string {
        if (items.empty()) return "is a non-empty list of the sparse features' names";
        std::set<std::string> seen;
        for (const std::string& f : items) {
          if (!ValidName(f)) {
            return absl::StrCat("has ", config_internal::Quoted(f),
                                ": a feature's name is letters, digits, _ - . and / (not "
                                "leading, trailing or doubled), at most 128");
          }
          if (!seen.insert(f).second) {
            return absl::StrCat("names ", f, " twice; each feature has one table");
          }
        }
        layer->features = items;
        return "";
      });
}

// linear's crosses: lists of features' names. Whether each is a cross (two
// or more distinct features, no two of the same features) is checked once
// the layer has its name (model_spec.cc), so that the message can name it.
KeySpec CrossesKey() {
  KeySpec key =
      Key("crosses", "none",
          "a list of crosses, e.g. [[C1, C2], [C3, C4, C5]], each a list of two or more distinct "
          "sparse features' names (listed in features or not), as "
          "tf.feature_column.crossed_column: a table <name>/<a>_X_<b>... of one weight per "
          "combination of an example's values of the features (none if one has none), its row "
          "the combination's fingerprint as tf.sparse.cross_hashed takes it, modulo buckets "
          "(with dynamic: true, its low 63 bits)",
          nullptr, [](const LayerSpec& layer) {
            std::vector<std::string> crosses;
            for (const std::vector<std::string>& cross : layer.crosses) {
              std::vector<std::string> quoted;
              for (const std::string& f : cross) quoted.push_back(config_internal::Quoted(f));
              crosses.push_back(absl::StrCat("[", absl::StrJoin(quoted, ", "), "]"));
            }
            return absl::StrCat("[", absl::StrJoin(crosses, ", "), "]");
          });
  key.set_lists = [](const std::vector<std::vector<std::string>>& lists,
                     LayerSpec* layer) -> std::string {
    for (const std::vector<std::string>& cross : lists) {
      for (const std::string& f : cross) {
        if (!ValidName(f)) {
          return absl::StrCat("has ", config_internal::Quoted(f),
                              ": a feature's name is letters, digits, _ - . and / (not "
                              "leading, trailing or doubled), at most 128");
        }
      }
    }
    layer->crosses = lists;
    return "";
  };
  key.written = [](const LayerSpec& layer) { return !layer.crosses.empty(); };
  return key;
}
// embedding's sequence: {max_length: L, positions: none}, written only for
// a sequence.
KeySpec SequenceKey() {
  KeySpec key =
      Key("sequence", "none",
          "a map {max_length: L, positions: ...}: the feature's values in order as a sequence [L, "
          "dim] with a mask instead of one combined row; an example keeps its last L values, "
          "padding follows them (the combiner does not apply)",
          nullptr, [](const LayerSpec& layer) {
            return absl::StrCat("{max_length: ", layer.max_length, ", positions: ", layer.positions,
                                "}");
          });
  key.written = [](const LayerSpec& layer) { return layer.max_length > 0; };
  key.sub_keys = {
      IntKey("max_length", &LayerSpec::max_length, 1, 16384, "",
             "a whole number in [1, 16384]: the positions kept"),
      ChoiceKey("positions", &LayerSpec::positions, {"none", "from_start", "from_end"}, "none",
                "none, from_start (a trainable <name>/positions [L, dim] added by position "
                "from the first kept value: text) or from_end (from the last: a history, 0 the "
                "most recent)")};
  return key;
}

}  // namespace model_spec_internal
}  // namespace pstrain
