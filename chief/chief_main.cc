// pstrain-chief: coordinates a job (initialize, train as replica 0,
// evaluate, end the job).
//   pstrain-chief --config cluster.yaml --job_name chief   (or TF_CONFIG)
#include "chief/coordinator.h"
#include "cloud/gcs_env.h"
#include "common/version.h"
#include "role/role_process.h"

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-chief")) return 0;
  pstrain::InitProcess(&argc, &argv,
                       "pstrain-chief --config FILE --job_name chief  (or TF_CONFIG)");
  return pstrain::RunRole("chief", pstrain::RunChief, pstrain::ProcessEnv());
}
