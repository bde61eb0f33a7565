// pstrain-ckpt: what a checkpoint holds, and whether its files are whole
// (TensorFlow's inspect_checkpoint for pstrain's files).
//   pstrain-ckpt <job_dir | path/to/model.ckpt-N[.index]> [--all_checkpoints]
// Exits 0 if every file checked out, 1 on a missing or damaged file (the
// error names it), 2 on bad usage.
#include <cstdio>
#include <string>
#include <vector>

#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "io/checkpoint_inspect.h"

DEFINE_bool(all_checkpoints, false,
            "Given a job dir, inspect every checkpoint in it (newest first), not just the newest.");

namespace {

constexpr char kUsage[] =
    "usage: pstrain-ckpt <job_dir | path/to/model.ckpt-N[.index]> [--all_checkpoints]";

// Whether argv names a flag gflags does not know (gflags would exit 1 on it;
// bad usage exits 2 here).
bool HasUnknownFlag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg = arg.substr(arg[1] == '-' ? 2 : 1);
    arg = arg.substr(0, arg.find('='));
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(arg.c_str(), &info)) continue;
    if (arg.rfind("no", 0) == 0 && gflags::GetCommandLineFlagInfo(arg.c_str() + 2, &info) &&
        info.type == "bool") {
      continue;
    }
    std::fprintf(stderr, "pstrain-ckpt: unknown flag %s\n", argv[i]);
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-ckpt")) return 0;
  gflags::SetUsageMessage(kUsage);
  if (HasUnknownFlag(argc, argv)) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  if (argc != 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  pstrain::Env* env = pstrain::ProcessEnv();
  absl::StatusOr<std::vector<std::string>> paths =
      pstrain::CheckpointIndexPaths(env, argv[1], FLAGS_all_checkpoints);
  if (!paths.ok()) {
    std::fprintf(stderr, "pstrain-ckpt: %s\n", std::string(paths.status().message()).c_str());
    return 1;
  }
  int exit_code = 0;
  for (size_t i = 0; i < paths->size(); ++i) {
    if (i > 0) std::printf("\n");
    absl::StatusOr<std::string> report = pstrain::InspectCheckpoint(env, (*paths)[i]);
    if (report.ok()) {
      std::fputs(report->c_str(), stdout);
    } else {
      std::fflush(stdout);
      std::fprintf(stderr, "pstrain-ckpt: %s\n", report.status().ToString().c_str());
      exit_code = 1;
    }
  }
  return exit_code;
}
