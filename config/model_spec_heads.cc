// A multi-task spec's `heads:` (ModelSpec::heads): each read on its own
// (ParseHeads), then against the layers (CheckHeads).
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/config_yaml_util.h"
#include "config/model_spec.h"
#include "config/model_spec_graph.h"
#include "config/model_spec_types.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {
namespace model_spec_internal {
namespace {

using config_internal::ErrorAt;
using config_internal::Quoted;
using config_internal::Source;
using config_internal::Sv;

// A head's name, which prefixes its metrics ("delayed/auc") and names its
// output when served: letters, digits and _, not leading with a digit.
bool ValidHeadName(const std::string& name) {
  if (name.empty() || name.size() > 64 || std::isdigit(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

absl::StatusOr<HeadSpec> ParseHead(const Source& source, const YAML::Node& node, int index) {
  const std::string where = absl::StrCat("heads[", index, "]");
  static const std::vector<std::string> kKeys = {"name",  "kind",   "classes", "input",
                                                 "label", "weight", "loss",    "huber_delta"};
  static const std::vector<std::string> kKinds = {"binary", "softmax", "regression"};
  static const std::vector<std::string> kLosses = {"mse", "mae", "huber"};
  if (!node.IsMap()) {
    return ErrorAt(source, node,
                   absl::StrCat(where,
                                " is a head: {name: delayed, kind: binary, input: "
                                "delayed_logit, label: delayed}"));
  }
  HeadSpec head;
  head.line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
  YAML::Node classes_node, loss_node, delta_node;
  PSTRAIN_RETURN_IF_ERROR(config_internal::ForEachEntry(
      source, node, where,
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        const std::string path = absl::StrCat(where, ".", key);
        PSTRAIN_ASSIGN_OR_RETURN(std::string text, config_internal::ScalarOf(source, value, path));
        if (key == "name") {
          if (!ValidHeadName(text)) {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", Quoted(text),
                                        ": a head's name is letters, digits and _ (not leading "
                                        "with a digit), at most 64"));
          }
          head.name = text;
        } else if (key == "kind") {
          if (text != "binary" && text != "softmax" && text != "regression") {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", Quoted(text),
                                        ": binary (one logit), softmax (classes logits) or "
                                        "regression (one value)",
                                        DidYouMean(text, kKinds)));
          }
          head.kind = text;
        } else if (key == "classes") {
          classes_node = value;
          if (!absl::SimpleAtoi(Sv(text), &head.classes) || head.classes < 2 ||
              head.classes > kMaxSize) {
            return ErrorAt(
                source, value,
                absl::StrCat(path, " = ", Quoted(text), ": a whole number in [2, ", kMaxSize, "]"));
          }
        } else if (key == "input") {
          if (text.empty()) return ErrorAt(source, value, path + " is a layer's name");
          head.input = text;
        } else if (key == "label") {
          if (text.empty()) return ErrorAt(source, value, path + " is a column's name");
          head.label = text;
        } else if (key == "weight") {
          if (!absl::SimpleAtof(Sv(text), &head.weight) || !(head.weight > 0) ||
              !std::isfinite(head.weight)) {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", Quoted(text),
                                        ": a number > 0, the head's share of the loss"));
          }
        } else if (key == "loss") {
          loss_node = value;
          if (text != "mse" && text != "mae" && text != "huber") {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", Quoted(text),
                                        ": a regression head's loss is mse, mae or huber",
                                        DidYouMean(text, kLosses)));
          }
          head.loss = text;
        } else if (key == "huber_delta") {
          delta_node = value;
          if (!absl::SimpleAtof(Sv(text), &head.huber_delta) || !(head.huber_delta > 0) ||
              !std::isfinite(head.huber_delta)) {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", Quoted(text), ": a number > 0"));
          }
        } else {
          return ErrorAt(source, key_node,
                         config_internal::UnknownKeyMessage(where + ".", key, kKeys));
        }
        return absl::OkStatus();
      }));
  std::string missing;
  if (head.name.empty()) missing = "name";
  if (head.kind.empty()) absl::StrAppend(&missing, missing.empty() ? "" : ", ", "kind");
  if (head.input.empty()) absl::StrAppend(&missing, missing.empty() ? "" : ", ", "input");
  if (!missing.empty()) {
    return ErrorAt(source, node,
                   absl::StrCat(where, " needs ", missing,
                                ": {name: delayed, kind: binary, input: delayed_logit}"));
  }
  if (head.kind == "softmax" && classes_node.IsNull()) {
    return ErrorAt(source, node,
                   absl::StrCat(where, " (", head.name, "): a softmax head needs classes"));
  }
  if (head.kind == "binary" && !classes_node.IsNull() && head.classes != 2) {
    return ErrorAt(source, classes_node,
                   absl::StrCat(where, ".classes = ", head.classes,
                                ": a binary head has one logit for two classes; omit classes"));
  }
  if (head.kind == "regression" && !classes_node.IsNull()) {
    return ErrorAt(source, classes_node,
                   absl::StrCat(where, ".classes: a regression head predicts a value; omit it"));
  }
  if (head.kind != "regression" && !loss_node.IsNull()) {
    return ErrorAt(source, loss_node,
                   absl::StrCat(where, ".loss is a regression head's; a ", head.kind,
                                " head's is cross-entropy"));
  }
  if (!delta_node.IsNull() && head.loss != "huber") {
    return ErrorAt(
        source, delta_node,
        absl::StrCat(where, ".huber_delta is for loss: huber, not ",
                     head.kind == "regression" ? "loss: " + head.loss : "kind: " + head.kind));
  }
  if (head.kind == "binary") head.classes = 2;
  if (head.kind == "regression") head.classes = 0;
  if (head.label.empty()) head.label = head.name;
  return head;
}

}  // namespace

absl::Status ParseHeads(const Source& source, const YAML::Node& node,
                        std::vector<HeadSpec>* heads) {
  if (!node.IsSequence() || node.size() == 0) {
    return ErrorAt(source, node,
                   "heads is a non-empty list of heads, e.g. [{name: delayed, kind: binary, "
                   "input: delayed_logit}, {name: delay, kind: regression, input: delay_out}]");
  }
  constexpr size_t kMaxHeads = 64;
  if (node.size() > kMaxHeads) {
    return ErrorAt(source, node,
                   absl::StrCat("heads: ", node.size(), " heads, over the limit of ", kMaxHeads));
  }
  std::set<std::string> names;
  int index = 0;
  for (const YAML::Node& entry : node) {
    PSTRAIN_ASSIGN_OR_RETURN(HeadSpec head, ParseHead(source, entry, index++));
    if (!names.insert(head.name).second) {
      return ErrorAt(source, entry,
                     absl::StrCat("heads[", index - 1, "]: head ", head.name,
                                  " is named twice; each head has its own name"));
    }
    heads->push_back(std::move(head));
  }
  if (heads->size() < 2) {
    return ErrorAt(source, node,
                   "heads is for a model of two heads or more; a model of one gives head: "
                   "(softmax with classes:, binary, or regression with loss:) and its label is "
                   "the data's");
  }
  return absl::OkStatus();
}

absl::Status CheckHeads(const Source& source, const std::vector<LayerSpec>& layers,
                        const std::vector<HeadSpec>& heads) {
  std::map<std::string, const HeadSpec*> by_input, by_label;
  std::vector<std::string> names;
  for (const LayerSpec& l : layers) names.push_back(l.name);
  for (const HeadSpec& head : heads) {
    const std::string where =
        absl::StrCat(source.name, ": head ", head.name, " (line ", head.line, ")");
    bool found = false;
    for (const LayerSpec& l : layers) found = found || l.name == head.input;
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(where, " takes input: ", Quoted(head.input),
                                                     ", which is no layer's name",
                                                     DidYouMean(head.input, names)));
    }
    if (auto [it, inserted] = by_input.emplace(head.input, &head); !inserted) {
      return absl::InvalidArgumentError(absl::StrCat(where, " takes the output of layer ",
                                                     head.input, ", as head ", it->second->name,
                                                     " does; give each head a layer of its own"));
    }
    if (auto [it, inserted] = by_label.emplace(head.label, &head); !inserted) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is trained on label ", head.label,
                                                     ", as head ", it->second->name,
                                                     " is; give each head its own label"));
    }
  }
  return absl::OkStatus();
}

}  // namespace model_spec_internal
}  // namespace pstrain
