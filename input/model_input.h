#ifndef PSTRAIN_INPUT_MODEL_INPUT_H_
#define PSTRAIN_INPUT_MODEL_INPUT_H_

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/augment.h"
#include "data/dataset.h"
#include "data/formats/tabular_examples.h"
#include "data/load.h"
#include "data/tabular.h"
#include "models/model.h"

namespace pstrain {

// InvalidArgument unless `data` (read from `dir`) holds images of `model`'s
// input shape (HWC) with labels below its class count (finite numbers for a
// regression head).
inline absl::Status CheckModelInput(const Model& model, const Dataset& data,
                                    const std::string& dir) {
  const Shape& s = model.input_shape();
  if (s.size() == 1) {
    // Tabular: dense features and the sparse features its layers read.
    absl::Status shape = CheckTabularShape(data, s[0], model.name(), dir);
    if (!shape.ok()) return shape;
    absl::StatusOr<std::vector<int>> columns =
        SelectSparseFeatures(data, model.sparse_features(), dir);
    if (!columns.ok()) return columns.status();
  } else {
    if (s.size() != 3) return absl::InvalidArgumentError("model input is neither HWC nor flat");
    absl::Status shape = CheckExampleShape(data, static_cast<int>(s[0]), static_cast<int>(s[1]),
                                           static_cast<int>(s[2]), model.name(), dir);
    if (!shape.ok()) return shape;
  }
  const size_t width = model.heads().size();
  if (data.label_width != static_cast<int>(width)) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, " holds ", data.label_width, " label", data.label_width == 1 ? "" : "s",
        " per example, but model ", model.name(), " has ", width, " head", width == 1 ? "" : "s",
        data.tabular ? "; give each head its label (CSV labels:, an Example feature per head)"
                     : "; images carry one label: a model of several heads reads tabular "
                       "data"));
  }
  for (size_t i = 0; i < data.labels.size(); ++i) {
    const float label = data.labels[i];
    const ModelHead& head = model.heads()[i % width];
    const std::string which =
        head.name.empty() ? "" : absl::StrCat(" (head ", head.name, ", label ", head.label, ")");
    if (head.kind == Head::kRegression) {
      if (!std::isfinite(label)) {
        return absl::InvalidArgumentError(absl::StrCat(dir, " has an example labelled ", label,
                                                       which,
                                                       "; a regression label is a finite number"));
      }
      continue;
    }
    if (label < 0 || label >= head.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, " has an example of class ", label, which, ", but model ", model.name(),
                       " has classes: ", head.num_classes, " (0..", head.num_classes - 1,
                       "); give the model as many classes as the data has"));
    }
  }
  return absl::OkStatus();
}

// What a tabular `model` (input [n]) reads from each tf.train.Example:
// "label" (a multi-task model: each head's label), n floats in "dense", and
// its sparse features.
inline TabularFeatures TabularFeaturesOf(const Model& model) {
  TabularFeatures features;
  features.num_dense = model.input_shape().empty() ? 0 : model.input_shape()[0];
  features.sparse = model.sparse_features();
  features.labels.clear();
  for (const ModelHead& head : model.heads()) {
    features.labels.push_back(
        {head.label.empty() || !model.multi_head() ? "label" : head.label, head.num_classes});
  }
  return features;
}

// The augmentation a training replica applies for `model`; `distort` false
// keeps only the standardization (--use_distortion_for_training=false).
inline Augmentation TrainingAugmentation(const Model& model, bool distort) {
  const InputPreprocessing& p = model.input_preprocessing();
  Augmentation a;
  a.pad = distort ? p.crop_padding : 0;
  a.flip = distort && p.random_flip;
  a.standardize = p.per_image_standardization;
  return a;
}

}  // namespace pstrain

#endif  // PSTRAIN_INPUT_MODEL_INPUT_H_
