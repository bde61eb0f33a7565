#include "worker/evaluation.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "data/augment.h"
#include "data/batcher.h"

namespace pstrain {

EvalMetrics EvaluateDataset(Model* model, const ParameterView& view, const Dataset& data,
                            int batch_size) {
  EvalMetrics metrics;
  metrics.global_step = view.global_step;
  std::vector<float> images(static_cast<size_t>(batch_size) * data.example_size());
  std::vector<int32_t> labels(batch_size);
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < data.size(); begin += batch_size) {
    const int64_t n = std::min<int64_t>(batch_size, data.size() - begin);
    GatherRange(data, begin, n, images.data(), labels.data());
    if (model->input_preprocessing().per_image_standardization) {
      for (int64_t i = 0; i < n; ++i) {
        StandardizeImage(images.data() + i * data.example_size(), data.example_size());
      }
    }
    LossResult r = model->Evaluate(view.params, view.state, images.data(), labels.data(), n);
    loss_sum += r.loss_sum;
    correct += r.correct;
  }
  metrics.examples = data.size();
  if (data.size() > 0) {
    metrics.accuracy = static_cast<double>(correct) / data.size();
    metrics.loss = loss_sum / data.size();
  }
  return metrics;
}

std::string FormatEvalLine(const EvalMetrics& m) {
  return absl::StrFormat(
      "Saving dict for global step %d: accuracy = %.4f, global_step = %d, "
      "loss = %.5f",
      m.global_step, m.accuracy, m.global_step, m.loss);
}

}  // namespace pstrain
