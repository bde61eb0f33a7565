// The multi-task layers in a model spec: mmoe's experts, tasks and list of
// units, slice's range; written out and read back, and refused naming the
// layer, key and line.
#include <string>
#include <string_view>
#include <vector>

#include "config/model_spec.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

const char kSpec[] = R"(input: [8]
head: binary
layers:
  - mmoe: {experts: 3, tasks: 2, units: [6, 4], kernel_initializer: he_normal}
  - slice: {input: mmoe, begin: 4, size: 4, name: t1}
  - slice: {input: mmoe, size: 4, name: t0}
  - add: {inputs: [t1]}
  - dense: {units: 1}
)";

TEST(ModelSpecMultitaskTest, MmoeAndSliceReadAndWriteBack) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(kSpec, "mmoe.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const LayerSpec& mmoe = spec->layers[0];
  EXPECT_EQ(mmoe.name, "mmoe");
  EXPECT_EQ(mmoe.experts, 3);
  EXPECT_EQ(mmoe.tasks, 2);
  EXPECT_EQ(mmoe.expert_units, (std::vector<int>{6, 4}));
  EXPECT_EQ(mmoe.kernel_initializer.kind, "he_normal");
  EXPECT_EQ(spec->layers[1].begin, 4);
  EXPECT_EQ(spec->layers[1].size, 4);
  EXPECT_EQ(spec->layers[2].begin, 0);  // the default
  const std::string yaml = ModelSpecToYaml(*spec);
  EXPECT_NE(yaml.find("mmoe: {name: \"mmoe\", experts: 3, tasks: 2, units: [6, 4], "
                      "kernel_initializer: he_normal}"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("slice: {name: \"t0\", input: \"mmoe\", begin: 0, size: 4}"),
            std::string::npos)
      << yaml;
  absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "written");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_TRUE(SameModelSpec(*spec, *again)) << yaml;
  const std::string reference = LayerReference();
  EXPECT_NE(reference.find("mmoe: multi-gate mixture of experts"), std::string::npos);
  EXPECT_NE(reference.find("slice: the features [begin, begin + size)"), std::string::npos);
}

TEST(ModelSpecMultitaskTest, BadMmoeAndSliceAreRefusedNamingTheLayerKeyAndLine) {
  const std::string head = "input: [8]\nhead: binary\nlayers:\n";
  struct Case {
    std::string yaml;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {head + "  - mmoe: {experts: 0, tasks: 2, units: [4]}\n",
       {"layers[0] mmoe.experts = \"0\": experts must be in [1, 1024]", "line 4"}},
      {head + "  - mmoe: {experts: 2, tasks: 0, units: [4]}\n",
       {"layers[0] mmoe.tasks = \"0\": tasks must be in [1, 1024]", "line 4"}},
      {head + "  - dense: {units: 2}\n  - mmoe: {experts: 2, tasks: 1, units: []}\n",
       {"layers[1] mmoe.units is a non-empty list of whole numbers >= 1", "line 5"}},
      {head + "  - mmoe: {experts: 2, tasks: 1, units: [4, 0]}\n",
       {"layers[0] mmoe.units has \"0\": each is a whole number in [1, ", "line 4"}},
      {head + "  - mmoe: {experts: 2, tasks: 1, units: 4}\n",
       {"layers[0] mmoe.units is a non-empty list", "line 4"}},
      {head + "  - mmoe: {experts: 2, units: [4]}\n", {"layers[0] mmoe needs tasks", "line 4"}},
      {head + "  - mmoe: {experts: 2, tasks: 1}\n", {"layers[0] mmoe needs units", "line 4"}},
      {head + "  - mmoe: {experts: 2, tasks: 1, unit: 4}\n",
       {"unknown key mmoe.unit (did you mean units?)", "line 4"}},
      {head + "  - slice: {begin: 2}\n", {"layers[0] slice needs size", "line 4"}},
      {head + "  - slice: {begin: -1, size: 2}\n",
       {"layers[0] slice.begin = \"-1\": begin must be in [0, ", "line 4"}},
      {head + "  - slice: {size: 0}\n",
       {"layers[0] slice.size = \"0\": size must be in [1, ", "line 4"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(c.yaml, "net.yaml");
    ASSERT_FALSE(spec.ok()) << c.yaml;
    EXPECT_TRUE(absl::IsInvalidArgument(spec.status())) << spec.status();
    const std::string message(spec.status().message());
    for (const std::string& s : c.says) {
      EXPECT_NE(message.find(s), std::string::npos) << c.yaml << "\n -> " << message;
    }
  }
}

}  // namespace
}  // namespace pstrain
