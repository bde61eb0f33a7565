// The checks on a model spec's layers as a graph (model_spec_graph.h), and
// which layers take the model's input when they name none.
#include "config/model_spec_graph.h"

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "config/model_spec_types.h"

namespace pstrain {
namespace model_spec_internal {

using config_internal::Source;

absl::Status NameLayers(const Source& source, std::vector<LayerSpec>* layers) {
  std::map<std::string, int> taken;  // name -> line
  for (const LayerSpec& layer : *layers) {
    if (layer.name.empty()) continue;
    auto [it, inserted] = taken.emplace(layer.name, layer.line);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(source.name, ": two layers are named ", layer.name, " (lines ", it->second,
                       " and ", layer.line, "); every layer's name is its own"));
    }
  }
  std::map<std::string, int> next;  // keras name -> next number
  for (LayerSpec& layer : *layers) {
    if (!layer.name.empty()) continue;
    const std::string base = FindType(layer.type)->keras_name;
    int& n = next[base];
    std::string name;
    do {
      name = n == 0 ? base : absl::StrCat(base, "_", n);
      ++n;
    } while (taken.count(name));
    layer.name = name;
    taken.emplace(name, layer.line);
  }
  return absl::OkStatus();
}

absl::Status CheckTables(const Source& source, const std::vector<LayerSpec>& layers) {
  std::map<std::string, const LayerSpec*> shared;  // table -> its first embedding
  for (const LayerSpec& l : layers) {
    if (l.type != "embedding" && l.type != "linear") continue;
    if (!l.table.empty()) {
      if (l.table.find('/') != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(source.name, ": layer ", l.name, " (", l.type, ", line ", l.line,
                         ") shares table ", l.table,
                         ", but a shared table's name has no / (a layer's own tables are named "
                         "<layer>/...)"));
      }
      auto [first, added] = shared.emplace(l.table, &l);
      const LayerSpec& f = *first->second;
      if (!added && (f.dim != l.dim || f.buckets != l.buckets || f.dynamic != l.dynamic ||
                     !(f.embeddings_initializer == l.embeddings_initializer))) {
        return absl::InvalidArgumentError(absl::StrCat(
            source.name, ": layer ", l.name, " (", l.type, ", line ", l.line, ") shares table ",
            l.table, " with layer ", f.name, " (line ", f.line,
            ") but declares it otherwise (dim, buckets or dynamic, embeddings_initializer); "
            "every embedding of a shared table declares it alike"));
      }
    }
    if (l.buckets > 0 && l.dynamic) {
      return absl::InvalidArgumentError(absl::StrCat(
          source.name, ": layer ", l.name, " (", l.type, ", line ", l.line,
          ") has both buckets and dynamic: true; its table is either bucketed (buckets: <n>, "
          "rows [0, n)) or dynamic (any id), so give one of the two"));
    }
    if (l.buckets == 0 && !l.dynamic) {
      return absl::InvalidArgumentError(absl::StrCat(
          source.name, ": layer ", l.name, " (", l.type, ", line ", l.line,
          ") needs buckets: <n> (a table of rows [0, n)) or dynamic: true (a table of any id, "
          "rows created on first touch), one of the two"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCrosses(const Source& source, const std::vector<LayerSpec>& layers) {
  for (const LayerSpec& l : layers) {
    const std::string layer =
        absl::StrCat(source.name, ": layer ", l.name, " (", l.type, ", line ", l.line, ")");
    std::map<std::set<std::string>, std::string> crossed;  // features -> the cross as written
    std::set<std::string> tables(l.features.begin(), l.features.end());
    for (const std::vector<std::string>& cross : l.crosses) {
      const std::string text = absl::StrCat("[", absl::StrJoin(cross, ", "), "]");
      if (cross.size() < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(layer, ": cross ", text, " has ", cross.size(),
                         cross.size() == 1 ? " feature" : " features",
                         "; a cross is a list of two or more features' names, e.g. [C1, C2]"));
      }
      std::set<std::string> features;
      for (const std::string& f : cross) {
        if (!features.insert(f).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              layer, ": cross ", text, " names ", f, " twice; a cross is of distinct features"));
        }
      }
      auto [it, added] = crossed.emplace(features, text);
      if (!added) {
        return absl::InvalidArgumentError(
            absl::StrCat(layer, ": crosses ", it->second, " and ", text,
                         " cross the same features; give each cross once"));
      }
      const std::string table = absl::StrJoin(cross, "_X_");
      if (!tables.insert(table).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(layer, ": cross ", text, "'s table ", l.name, "/", table,
                         " has the name of another of its tables; rename a feature"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGraph(const Source& source, const std::vector<LayerSpec>& layers,
                        const std::vector<HeadSpec>& heads) {
  std::map<std::string, int> index;  // name -> position
  for (size_t i = 0; i < layers.size(); ++i) index[layers[i].name] = static_cast<int>(i);
  std::vector<std::string> names = {"input"};
  std::vector<int> uses(layers.size(), 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    for (const std::string& name : LayerInputNames(l)) {
      if (name.empty()) {  // the previous layer's output
        if (i > 0) ++uses[i - 1];
        continue;
      }
      if (name == "input") continue;
      auto it = index.find(name);
      if (it == index.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            source.name, ": layer ", l.name, " (line ", l.line, ") takes ",
            absl::StripPrefix(config_internal::UnknownKeyMessage("", name, names), "unknown key "),
            ", which is no layer's name"));
      }
      if (it->second >= static_cast<int>(i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            source.name, ": layer ", l.name, " (line ", l.line, ") takes ", name, ", which ",
            it->second == static_cast<int>(i) ? "is itself" : "comes after it",
            "; a layer takes the outputs of layers before it"));
      }
      ++uses[it->second];
    }
    names.push_back(l.name);
  }
  for (const HeadSpec& head : heads) {
    auto it = index.find(head.input);
    if (it != index.end()) ++uses[it->second];
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (uses[i] == 0 && i + 1 == layers.size()) {
      if (heads.empty()) break;  // the last layer's output is the model's
      return absl::InvalidArgumentError(absl::StrCat(
          source.name, ": the output of the last layer, ", layers[i].name, " (line ",
          layers[i].line, "), is no head's input; remove it or name it in a head's input"));
    }
    if (uses[i] == 0) {
      const LayerSpec& next = layers[i + 1];
      return absl::InvalidArgumentError(absl::StrCat(
          source.name, ": the output of layer ", layers[i].name, " (line ", layers[i].line,
          ") is not taken by any later layer (the next one takes ",
          next.input.empty() ? "the model's input, as every " + next.type + " without input: does"
                             : "input: " + next.input,
          ")", heads.empty() ? "" : " nor any head's input", "; remove it or take it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace model_spec_internal

std::vector<std::string> LayerInputNames(const LayerSpec& layer) {
  std::vector<std::string> names = {
      layer.input.empty() && LayerTakesModelInputByDefault(layer) ? "input" : layer.input};
  names.insert(names.end(), layer.inputs.begin(), layer.inputs.end());
  if (!layer.query.empty()) names.push_back(layer.query);
  return names;
}

bool LayerTakesModelInputByDefault(const LayerSpec& layer) {
  return layer.type == "embedding" || layer.type == "linear";
}

}  // namespace pstrain
