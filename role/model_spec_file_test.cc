// Model spec files read by the role startup (LoadModelSpecFile), then built
// (BuildJobModel): errors name the author's file and line, relative weights
// are the resolved ones. Moved from models/model_options_test.cc unchanged.
#include <filesystem>
#include <fstream>
#include <string>

#include "common/env.h"
#include "config/cluster_config.h"
#include "gtest/gtest.h"
#include "models/model_options.h"
#include "role/model_source.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

// This binary's temp dir, removed at exit.
const std::string& Dir() {
  static const std::string* const dir =
      new std::string(testing_util::TempDirRemovedAtExit("pstrain_spec_file_test"));
  return *dir;
}

TEST(ModelOptionsTest, ShapeErrorsNameTheFileAndLineTheAuthorWrote) {
  const std::string path = Dir() + "/shape_error_net.yaml";
  std::ofstream(path) << R"(# a comment
# and another, so the lines are not those of the spec as written out
input: [8, 8, 1]
classes: 2
layers:
  - conv2d: {filters: 4, kernel: 3}
  - dense: {units: 2}
)";
  TrainingSpec t;
  t.model = path;
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  absl::Status s = BuildJobModel(t).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find(path + ": layer dense (dense, line 7) cannot take its input"),
            std::string::npos)
      << s;
}

TEST(ModelOptionsTest, ASpecFilesRelativeWeightsAreTheJobsResolvedOnes) {
  const std::string path = Dir() + "/relative_weights_net.yaml";
  std::ofstream(path) << "input: [2, 2, 1]\nclasses: 2\nweights: w/net.onnx\n"
                         "layers: [flatten, {dense: {units: 2}}]\n";
  TrainingSpec t;
  t.model = path;
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  absl::StatusOr<std::unique_ptr<Model>> model = BuildJobModel(t);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string weights =
      (std::filesystem::path(Dir()) / "w/net.onnx").lexically_normal().string();
  EXPECT_NE((*model)->spec_yaml().find("weights: \"" + weights + "\""), std::string::npos)
      << (*model)->spec_yaml();
}

}  // namespace
}  // namespace pstrain
