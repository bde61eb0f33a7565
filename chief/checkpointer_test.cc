#include "chief/checkpointer.h"

#include "gtest/gtest.h"
#include "models/registry.h"

namespace pstrain {
namespace {

TEST(CheckpointModelCheckTest, RefusesAnotherShapeNamingTheVariable) {
  std::unique_ptr<Model> model = *BuildModel("mnist_cnn", ModelOptions{});
  CheckpointIndex index;
  index.set_model("mnist_cnn");
  index.set_num_params(model->num_params());
  index.set_num_state(model->num_state());
  AddModelVariables(*model, &index);
  EXPECT_TRUE(CheckCheckpointMatchesModel(index, *model, "/j/model.ckpt-5.index").ok());

  CheckpointIndex other = index;
  const std::string name = other.variables(1).name();
  other.mutable_variables(1)->set_shape(0, 99);
  absl::Status s = CheckCheckpointMatchesModel(other, *model, "/j/model.ckpt-5.index");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("variable " + name + " has shape"), std::string::npos) << s;

  other = index;
  other.mutable_variables(0)->set_name("dense_9/kernel");
  s = CheckCheckpointMatchesModel(other, *model, "/j/model.ckpt-5.index");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find(index.variables(0).name()), std::string::npos) << s;

  other = index;
  other.add_variables()->set_name("extra/bias");
  s = CheckCheckpointMatchesModel(other, *model, "/j/model.ckpt-5.index");
  EXPECT_NE(s.message().find("extra/bias"), std::string::npos) << s;
}

}  // namespace
}  // namespace pstrain
