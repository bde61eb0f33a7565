// pstrain-export: exports a trained model for serving from a checkpoint, as
// the chief does at the end of training.
//   pstrain-export <job_dir | job_dir/model.ckpt-N[.index]> [--export_dir=DIR] [--keep=5]
//   pstrain-export <job_dir | job_dir/model.ckpt-N[.index]> --format=onnx --output=FILE.onnx
// The default format (pstrain) writes DIR/<version>/ (default DIR:
// <job_dir>/export: variables.bin, model.onnx, model.json) and prints it;
// --format=onnx writes just the ONNX file (local or gs://). Exits 0 on
// success, 1 on a missing or damaged checkpoint (the error names it), 2 on
// bad usage.
#include <cstdio>
#include <string>

#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/flags.h"
#include "common/version.h"
#include "export/export.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_string(export_dir, "", "Where the versions go (default: <job_dir>/export).");
DEFINE_int32(keep, 5, "Versions kept in the export dir, the new one included (0: all).");
DEFINE_string(format, "pstrain",
              "pstrain: a version directory (variables.bin, model.onnx, model.json) under "
              "--export_dir; onnx: one ONNX file at --output.");
DEFINE_string(output, "", "With --format=onnx: the file to write (local or gs://).");

namespace {

constexpr char kUsage[] =
    "usage: pstrain-export <job_dir | job_dir/model.ckpt-N[.index]> [--export_dir=DIR] "
    "[--keep=5]\n"
    "       pstrain-export <job_dir | job_dir/model.ckpt-N[.index]> --format=onnx "
    "--output=FILE.onnx";

// The job dir of a checkpoint index path (the directory holding it).
std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-export")) return 0;
  gflags::SetUsageMessage(kUsage);
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  const bool onnx = FLAGS_format == "onnx";
  if (argc != 2 || FLAGS_keep < 0 || (!onnx && FLAGS_format != "pstrain")) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  if (onnx != !FLAGS_output.empty()) {
    std::fprintf(stderr, "pstrain-export: %s\n%s\n",
                 onnx ? "--format=onnx writes one file: give it with --output=FILE.onnx"
                      : "--output is for --format=onnx; the pstrain format goes to --export_dir",
                 kUsage);
    return 2;
  }
  pstrain::Env* env = pstrain::ProcessEnv();
  absl::StatusOr<std::string> index = pstrain::ResolveCheckpointIndex(env, argv[1]);
  if (!index.ok()) {
    std::fprintf(stderr, "pstrain-export: %s\n", std::string(index.status().message()).c_str());
    return 1;
  }
  if (onnx) {
    absl::Status s = pstrain::ExportCheckpointAsOnnx(env, *index, FLAGS_output);
    if (!s.ok()) {
      std::fprintf(stderr, "pstrain-export: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("exported %s to %s\n", index->c_str(), FLAGS_output.c_str());
    return 0;
  }
  const std::string base =
      FLAGS_export_dir.empty() ? pstrain::JoinPath(DirOf(*index), "export") : FLAGS_export_dir;
  absl::StatusOr<std::string> dir = pstrain::ExportCheckpoint(env, *index, base);
  if (!dir.ok()) {
    std::fprintf(stderr, "pstrain-export: %s\n", dir.status().ToString().c_str());
    return 1;
  }
  if (FLAGS_keep > 0) {
    absl::StatusOr<std::vector<int64_t>> pruned = pstrain::PruneExports(env, base, FLAGS_keep);
    if (!pruned.ok()) {
      std::fprintf(stderr, "pstrain-export: exported, but could not delete old versions: %s\n",
                   pruned.status().ToString().c_str());
    }
  }
  std::printf("exported %s to %s\n", index->c_str(), dir->c_str());
  return 0;
}
