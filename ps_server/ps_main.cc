// pstrain-ps: one parameter server of a job.
//   pstrain-ps --config cluster.yaml --job_name ps --task_index 0
// or with TF_CONFIG set ({"cluster": ..., "task": {"type": "ps", "index": 0}}).
#include "cloud/gcs_env.h"
#include "common/version.h"
#include "ps_server/ps_runner.h"
#include "role/role_process.h"

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-ps")) return 0;
  pstrain::InitProcess(&argc, &argv,
                       "pstrain-ps --config FILE --job_name ps --task_index I  (or TF_CONFIG)");
  return pstrain::RunRole("ps", pstrain::RunParameterServer, pstrain::ProcessEnv());
}
