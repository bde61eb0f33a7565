#include "config/model_spec.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "config/config_yaml_util.h"
#include "config/model_spec_graph.h"
#include "config/model_spec_types.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {
namespace {

using config_internal::ErrorAt;
using config_internal::Source;
using config_internal::Sv;
using model_spec_internal::CheckCrosses;
using model_spec_internal::CheckGraph;
using model_spec_internal::CheckTables;
using model_spec_internal::FindType;
using model_spec_internal::FloatText;
using model_spec_internal::KeySpec;
using model_spec_internal::kMaxSize;
using model_spec_internal::NameLayers;
using model_spec_internal::TakesInputs;
using model_spec_internal::Types;
using model_spec_internal::TypeSpec;
using model_spec_internal::ValidName;

absl::StatusOr<std::string> Scalar(const Source& source, const YAML::Node& node,
                                   std::string_view path) {
  return config_internal::ScalarOf(source, node, path);
}

// One entry of `layers`: "type" or {type: {options}}.
absl::StatusOr<LayerSpec> ParseLayer(const Source& source, const YAML::Node& node, int index) {
  const std::string where = absl::StrCat("layers[", index, "]");
  LayerSpec layer;
  layer.line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
  YAML::Node options;
  if (node.IsScalar()) {
    layer.type = node.Scalar();
  } else if (node.IsMap() && node.size() == 1) {
    const auto entry = *node.begin();
    if (!entry.first.IsScalar()) return ErrorAt(source, node, where + ": the layer type is a name");
    layer.type = entry.first.Scalar();
    options = entry.second;
  } else {
    return ErrorAt(source, node,
                   absl::StrCat(where,
                                " is a layer: its type alone (flatten) or its type with its "
                                "options ({dense: {units: 10}})"));
  }
  const TypeSpec* type = FindType(layer.type);
  if (type == nullptr) {
    std::vector<std::string> names;
    for (const TypeSpec& t : Types()) names.push_back(t.type);
    return ErrorAt(
        source, node,
        absl::StrCat(where, ": unknown layer type ",
                     absl::StripPrefix(config_internal::UnknownKeyMessage("", layer.type, names),
                                       "unknown key "),
                     "; the types: ", absl::StrJoin(names, ", ")));
  }
  // Defaults that differ by type.
  if (layer.type == "max_pool" || layer.type == "average_pool") layer.strides = 0;
  if (layer.type == "din_attention") {
    layer.units = 36;
    layer.activation = "sigmoid";
  }
  std::set<std::string> given;
  PSTRAIN_RETURN_IF_ERROR(config_internal::ForEachEntry(
      source, options, absl::StrCat(where, " ", layer.type),
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        const std::string path = absl::StrCat(where, " ", layer.type, ".", key);
        given.insert(key);
        if (key == "inputs") {
          if (!TakesInputs(layer.type)) {
            return ErrorAt(source, key_node,
                           absl::StrCat(path,
                                        ": only add, concat and dot_interaction take inputs (any "
                                        "layer takes input: <name>)"));
          }
          if (!value.IsSequence() || value.size() == 0) {
            return ErrorAt(source, value,
                           path + " is a list of the names of earlier layers, e.g. [conv2d]");
          }
          for (const YAML::Node& n : value) {
            if (!n.IsScalar()) return ErrorAt(source, n, path + ": each is a layer's name");
            layer.inputs.push_back(n.Scalar());
          }
          return absl::OkStatus();
        }
        if (key == "crosses" && layer.type != "linear") {
          std::string name = "(unnamed)";
          for (const auto& entry : options) {
            if (entry.first.IsScalar() && entry.first.Scalar() == "name" &&
                entry.second.IsScalar()) {
              name = entry.second.Scalar();
            }
          }
          return ErrorAt(source, key_node,
                         absl::StrCat(path, ": layer ", name, " is ", layer.type,
                                      "; only linear takes crosses (crossed features, each a "
                                      "weight table of the wide part)"));
        }
        for (const KeySpec& k : type->keys) {
          if (k.name != key || k.sub_keys.empty()) continue;
          if (!value.IsMap()) return ErrorAt(source, value, absl::StrCat(path, " is ", k.accepts));
          std::set<std::string> sub_given;
          PSTRAIN_RETURN_IF_ERROR(config_internal::ForEachEntry(
              source, value, path,
              [&](const std::string& sub, const YAML::Node& sub_node,
                  const YAML::Node& sub_value) -> absl::Status {
                const std::string sub_path = absl::StrCat(path, ".", sub);
                sub_given.insert(sub);
                for (const KeySpec& s : k.sub_keys) {
                  if (s.name != sub) continue;
                  PSTRAIN_ASSIGN_OR_RETURN(std::string text, Scalar(source, sub_value, sub_path));
                  const std::string error = s.set(text, &layer);
                  if (error.empty()) return absl::OkStatus();
                  return ErrorAt(source, sub_value,
                                 absl::StrCat(sub_path, " = ", config_internal::Quoted(text), ": ",
                                              sub, " ", error));
                }
                std::vector<std::string> known;
                for (const KeySpec& s : k.sub_keys) known.push_back(s.name);
                return ErrorAt(
                    source, sub_node,
                    absl::StrCat(where, " ",
                                 config_internal::UnknownKeyMessage(
                                     absl::StrCat(layer.type, ".", key, "."), sub, known),
                                 "; ", key, " takes ", absl::StrJoin(known, ", ")));
              }));
          for (const KeySpec& s : k.sub_keys) {
            if (s.default_text.empty() && !sub_given.count(s.name)) {
              return ErrorAt(source, value,
                             absl::StrCat(path, " needs ", s.name, " (", s.accepts, ")"));
            }
          }
          return absl::OkStatus();
        }
        for (const KeySpec& k : type->keys) {
          if (k.name != key || k.set_lists == nullptr) continue;
          if (!value.IsSequence()) {
            return ErrorAt(source, value, absl::StrCat(path, " is ", k.accepts));
          }
          std::vector<std::vector<std::string>> lists;
          for (const YAML::Node& list : value) {
            if (!list.IsSequence()) {
              return ErrorAt(source, list,
                             absl::StrCat(path,
                                          ": each is a list of features' names, e.g. "
                                          "[C1, C2]"));
            }
            lists.emplace_back();
            for (const YAML::Node& n : list) {
              if (!n.IsScalar()) return ErrorAt(source, n, path + ": each feature is a name");
              lists.back().push_back(n.Scalar());
            }
          }
          const std::string error = k.set_lists(lists, &layer);
          if (error.empty()) return absl::OkStatus();
          return ErrorAt(source, value, absl::StrCat(path, " ", error));
        }
        for (const KeySpec& k : type->keys) {
          if (k.name != key || k.set_list == nullptr) continue;
          if (!value.IsSequence()) {
            return ErrorAt(source, value, absl::StrCat(path, " is ", k.accepts));
          }
          std::vector<std::string> items;
          for (const YAML::Node& n : value) {
            if (!n.IsScalar()) return ErrorAt(source, n, path + ": each is a name");
            items.push_back(n.Scalar());
          }
          const std::string error = k.set_list(items, &layer);
          if (error.empty()) return absl::OkStatus();
          return ErrorAt(source, value, absl::StrCat(path, " ", error));
        }
        PSTRAIN_ASSIGN_OR_RETURN(std::string text, Scalar(source, value, path));
        if (key == "input") {
          layer.input = text;
          return absl::OkStatus();
        }
        if (key == "name") {
          if (!ValidName(text)) {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", config_internal::Quoted(text),
                                        ": a name is letters, digits, _ - . and / (not "
                                        "leading, trailing or doubled), at most 128"));
          }
          if (text == "input") {
            return ErrorAt(source, value, path + ": input names the model's input, not a layer");
          }
          layer.name = text;
          return absl::OkStatus();
        }
        for (const KeySpec& k : type->keys) {
          if (k.name != key || k.set == nullptr) continue;
          const std::string error = k.set(text, &layer);
          if (error.empty()) return absl::OkStatus();
          return ErrorAt(
              source, value,
              absl::StrCat(path, " = ", config_internal::Quoted(text), ": ", key, " ", error));
        }
        std::vector<std::string> known = {"name", "input"};
        if (TakesInputs(layer.type)) known.push_back("inputs");
        for (const KeySpec& k : type->keys) known.push_back(k.name);
        return ErrorAt(source, key_node,
                       absl::StrCat(where, " ",
                                    config_internal::UnknownKeyMessage(
                                        absl::StrCat(layer.type, "."), key, known),
                                    "; ", layer.type, " takes ", absl::StrJoin(known, ", ")));
      }));
  for (const KeySpec& k : type->keys) {
    if (k.default_text.empty() && !given.count(k.name)) {
      return ErrorAt(source, node,
                     absl::StrCat(where, " ", layer.type, " needs ", k.name, " (", k.accepts, ")"));
    }
  }
  if (TakesInputs(layer.type) && layer.inputs.empty()) {
    return ErrorAt(source, node,
                   absl::StrCat(where, " ", layer.type,
                                " needs inputs: [<name>, ...], the layers whose outputs it takes "
                                "with the previous one's"));
  }
  if (layer.strides == 0) layer.strides = layer.pool;
  return layer;
}

absl::Status ParsePreprocessing(const Source& source, const YAML::Node& node, ModelSpec* spec) {
  static const std::vector<std::string> kKeys = {"crop_padding", "random_flip",
                                                 "per_image_standardization"};
  return config_internal::ForEachEntry(
      source, node, "preprocessing",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        const std::string path = absl::StrCat("preprocessing.", key);
        PSTRAIN_ASSIGN_OR_RETURN(std::string text, Scalar(source, value, path));
        if (key == "crop_padding") {
          if (!absl::SimpleAtoi(Sv(text), &spec->crop_padding) || spec->crop_padding < 0 ||
              spec->crop_padding > 1024) {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", config_internal::Quoted(text),
                                        ": a whole number in [0, 1024]"));
          }
          return absl::OkStatus();
        }
        bool* flag = key == "random_flip"                 ? &spec->random_flip
                     : key == "per_image_standardization" ? &spec->per_image_standardization
                                                          : nullptr;
        if (flag == nullptr) {
          return ErrorAt(source, key_node,
                         config_internal::UnknownKeyMessage("preprocessing.", key, kKeys));
        }
        if (text != "true" && text != "false") {
          return ErrorAt(
              source, value,
              absl::StrCat(path, " = ", config_internal::Quoted(text), ": true or false"));
        }
        *flag = text == "true";
        return absl::OkStatus();
      });
}

absl::Status ParseTop(const Source& source, const YAML::Node& root, ModelSpec* spec) {
  bool have_input = false, have_classes = false, have_layers = false, have_loss = false,
       have_delta = false, have_head = false;
  YAML::Node classes_node, preprocessing_node, loss_node, delta_node, head_node, heads_node;
  static const std::vector<std::string> kKeys = {
      "name",        "input", "classes", "head",          "loss",
      "huber_delta", "heads", "layers",  "preprocessing", "weights"};
  static const std::vector<std::string> kHeads = {"softmax", "binary", "regression"};
  static const std::vector<std::string> kLosses = {"mse", "mae", "huber"};
  PSTRAIN_RETURN_IF_ERROR(config_internal::ForEachEntry(
      source, root, "",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        if (key == "name") {
          PSTRAIN_ASSIGN_OR_RETURN(spec->name, Scalar(source, value, "name"));
          if (!ValidName(spec->name)) {
            return ErrorAt(source, value,
                           absl::StrCat("name = ", config_internal::Quoted(spec->name),
                                        ": a name is letters, digits, _ - . and / (not "
                                        "leading, trailing or doubled), at most 128"));
          }
        } else if (key == "input") {
          have_input = true;
          if (!value.IsSequence() || (value.size() != 3 && value.size() != 1)) {
            return ErrorAt(source, value,
                           "input is [height, width, channels] of one example, e.g. [28, 28, 1], "
                           "or [features]: a tabular model's dense features, e.g. [13]");
          }
          // A tabular model may have no dense features, only sparse ones.
          const int64_t min = value.size() == 1 ? 0 : 1;
          for (const YAML::Node& d : value) {
            int64_t v = 0;
            if (!d.IsScalar() || !absl::SimpleAtoi(d.Scalar(), &v) || v < min || v > kMaxSize) {
              return ErrorAt(source, d,
                             absl::StrCat("input: every size is a whole number in [", min, ", ",
                                          kMaxSize, "]"));
            }
            spec->input.push_back(v);
          }
        } else if (key == "classes") {
          have_classes = true;
          classes_node = value;
          PSTRAIN_ASSIGN_OR_RETURN(std::string text, Scalar(source, value, "classes"));
          if (!absl::SimpleAtoi(Sv(text), &spec->classes) || spec->classes < 2 ||
              spec->classes > kMaxSize) {
            return ErrorAt(source, value,
                           absl::StrCat("classes = ", config_internal::Quoted(text),
                                        ": a whole number in [2, ", kMaxSize, "]"));
          }
        } else if (key == "heads") {
          heads_node = value;
          return model_spec_internal::ParseHeads(source, value, &spec->heads);
        } else if (key == "head") {
          have_head = true;
          head_node = value;
          PSTRAIN_ASSIGN_OR_RETURN(spec->head, Scalar(source, value, "head"));
          if (spec->head != "softmax" && spec->head != "binary" && spec->head != "regression") {
            return ErrorAt(source, value,
                           absl::StrCat("head = ", config_internal::Quoted(spec->head),
                                        ": head is softmax (classes logits, softmax "
                                        "cross-entropy), binary (one logit, sigmoid "
                                        "cross-entropy) or regression (one output, the "
                                        "label's value)",
                                        model_spec_internal::DidYouMean(spec->head, kHeads)));
          }
        } else if (key == "loss") {
          have_loss = true;
          loss_node = value;
          PSTRAIN_ASSIGN_OR_RETURN(spec->loss, Scalar(source, value, "loss"));
          if (spec->loss != "mse" && spec->loss != "mae" && spec->loss != "huber") {
            return ErrorAt(source, value,
                           absl::StrCat("loss = ", config_internal::Quoted(spec->loss),
                                        ": a regression head's loss is mse (squared error), mae "
                                        "(absolute error) or huber (with huber_delta)",
                                        model_spec_internal::DidYouMean(spec->loss, kLosses)));
          }
        } else if (key == "huber_delta") {
          have_delta = true;
          delta_node = value;
          PSTRAIN_ASSIGN_OR_RETURN(std::string text, Scalar(source, value, "huber_delta"));
          if (!absl::SimpleAtof(Sv(text), &spec->huber_delta) || !(spec->huber_delta > 0) ||
              !std::isfinite(spec->huber_delta)) {
            return ErrorAt(source, value,
                           absl::StrCat("huber_delta = ", config_internal::Quoted(text),
                                        ": a number > 0 (where the loss turns from squared to "
                                        "linear error)"));
          }
        } else if (key == "preprocessing") {
          preprocessing_node = value;
          return ParsePreprocessing(source, value, spec);
        } else if (key == "weights") {
          PSTRAIN_ASSIGN_OR_RETURN(spec->weights, Scalar(source, value, "weights"));
          if (!absl::EndsWith(Sv(spec->weights), ".onnx")) {
            return ErrorAt(source, value,
                           absl::StrCat("weights = ", config_internal::Quoted(spec->weights),
                                        ": the starting values come from an ONNX file (a path "
                                        "or gs:// URL ending .onnx)"));
          }
        } else if (key == "layers") {
          have_layers = true;
          if (!value.IsSequence() || value.size() == 0) {
            return ErrorAt(source, value, "layers is a non-empty list of layers");
          }
          if (value.size() > static_cast<size_t>(kMaxSpecLayers)) {
            return ErrorAt(source, value,
                           absl::StrCat("layers: ", value.size(), " layers, over the limit of ",
                                        kMaxSpecLayers));
          }
          int index = 0;
          for (const YAML::Node& entry : value) {
            PSTRAIN_ASSIGN_OR_RETURN(LayerSpec layer, ParseLayer(source, entry, index++));
            spec->layers.push_back(std::move(layer));
          }
        } else {
          return ErrorAt(source, key_node, config_internal::UnknownKeyMessage("", key, kKeys));
        }
        return absl::OkStatus();
      }));
  if (!spec->heads.empty()) {
    // A multi-task model says each head's kind, classes and loss in heads:.
    for (const auto& [given, node, key] : {std::tuple{have_head, head_node, "head"},
                                           std::tuple{have_classes, classes_node, "classes"},
                                           std::tuple{have_loss, loss_node, "loss"},
                                           std::tuple{have_delta, delta_node, "huber_delta"}}) {
      if (given) {
        return ErrorAt(source, node,
                       absl::StrCat(key, " is a single head's; with heads: each head says its ",
                                    key == std::string("head") ? "kind" : key, " (heads[i].",
                                    key == std::string("head") ? "kind" : key, ")"));
      }
    }
  }
  const bool binary = spec->head == "binary";
  const bool regression = spec->head == "regression";
  if (binary && have_classes && spec->classes != 2) {
    return ErrorAt(source, classes_node,
                   absl::StrCat("classes = ", spec->classes,
                                ": with head: binary the model gives one logit for two classes; "
                                "omit classes or give 2"));
  }
  if (regression && have_classes) {
    return ErrorAt(source, classes_node,
                   absl::StrCat("classes = ", spec->classes,
                                ": head: regression predicts a value, not a class; omit classes"));
  }
  if (!regression && have_loss) {
    return ErrorAt(source, loss_node,
                   absl::StrCat("loss is a regression head's (head: regression); head ", spec->head,
                                " has its own (cross-entropy)"));
  }
  if (have_delta && (!regression || spec->loss != "huber")) {
    return ErrorAt(
        source, delta_node,
        absl::StrCat("huber_delta is for head: regression with loss: huber, not ",
                     regression ? "loss: " : "head: ", regression ? spec->loss : spec->head));
  }
  if (binary) spec->classes = 2;
  if (regression) spec->classes = 0;
  const bool need_classes = !binary && !regression && spec->heads.empty();
  if (!have_input || (!have_classes && need_classes) || !have_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        source.name,
        ": a model spec has input ([height, width, channels] or [features]), classes (or head: "
        "binary or regression, or heads:) and layers",
        !have_input ? "; input is missing" : "",
        !have_classes && need_classes ? "; classes is missing" : "",
        !have_layers ? "; layers is missing" : ""));
  }
  if (spec->input.size() == 1 &&
      (spec->crop_padding != 0 || spec->random_flip || spec->per_image_standardization)) {
    return ErrorAt(source, preprocessing_node,
                   absl::StrCat("preprocessing is for images (input [height, width, channels]); "
                                "input [",
                                spec->input[0], "] is a tabular model's features"));
  }
  PSTRAIN_RETURN_IF_ERROR(NameLayers(source, &spec->layers));
  PSTRAIN_RETURN_IF_ERROR(CheckTables(source, spec->layers));
  PSTRAIN_RETURN_IF_ERROR(CheckCrosses(source, spec->layers));
  PSTRAIN_RETURN_IF_ERROR(model_spec_internal::CheckHeads(source, spec->layers, spec->heads));
  return CheckGraph(source, spec->layers, spec->heads);
}

}  // namespace

absl::StatusOr<ModelSpec> ParseModelSpec(std::string_view yaml, std::string_view source_name) {
  const Source source{std::string(source_name), /*show_lines=*/true};
  return config_internal::CatchYamlExceptions<ModelSpec>(
      source_name, [&]() -> absl::StatusOr<ModelSpec> {
        PSTRAIN_ASSIGN_OR_RETURN(YAML::Node root,
                                 config_internal::LoadYaml(yaml, source_name, "YAML"));
        ModelSpec spec;
        PSTRAIN_RETURN_IF_ERROR(ParseTop(source, root, &spec));
        return spec;
      });
}

}  // namespace pstrain
