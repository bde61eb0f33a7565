// The job config parsers: a cluster YAML (with Cloud ML Engine's
// trainingInput form), TF_CONFIG JSON, and the validation after them. Any
// input must give a config or an error, never a crash; a parsed config must
// survive JobConfigToYaml and parse back to itself.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/cluster_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pstrain::JobConfig> config = pstrain::ParseJobConfig(text, "fuzz.yaml");
  if (config.ok()) {
    (void)pstrain::ValidateJobConfig(*config);
    const std::string yaml = pstrain::JobConfigToYaml(*config);
    absl::StatusOr<pstrain::JobConfig> again = pstrain::ParseJobConfig(yaml, "again.yaml");
    // Strings that are not UTF-8 may not survive YAML; everything else does.
    if (again.ok() && !(*again == *config) && yaml.find('\\') == std::string::npos) {
      bool ascii = true;
      for (unsigned char c : text) ascii = ascii && c < 0x80;
      if (ascii) std::abort();
    }
  }
  absl::StatusOr<pstrain::TfConfig> tf = pstrain::ParseTfConfig(text);
  if (tf.ok()) (void)pstrain::ValidateCluster(tf->cluster);
  return 0;
}
