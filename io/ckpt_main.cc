// pstrain-ckpt: what a checkpoint holds, and whether its files are whole
// (TensorFlow's inspect_checkpoint for pstrain's files).
//   pstrain-ckpt <job_dir | path/to/model.ckpt-N[.index]> [--all_checkpoints]
//   pstrain-ckpt <job_dir | checkpoint> --projector_dir=DIR [--projector_rows=N]
//       [--csv_schema=FILE --train_files=PATTERNS]
// The second form writes the checkpoint's TensorBoard projector files
// (io/projector.h) into DIR, its rows named by the CSV files' text (by
// default the job's schema and train_files, as its checkpoint recorded them).
// Exits 0 if every file checked out, 1 on a missing or damaged file (the
// error names it), 2 on bad usage.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "config/cluster_config.h"
#include "data/formats/csv_format.h"
#include "data/formats/csv_id_text.h"
#include "data/stream/file_pattern.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "io/checkpoint.h"
#include "io/checkpoint_inspect.h"
#include "io/projector.h"

DEFINE_bool(all_checkpoints, false,
            "Given a job dir, inspect every checkpoint in it (newest first), not just the newest.");
DEFINE_string(projector_dir, "",
              "Write the checkpoint's embedding rows for TensorBoard's PROJECTOR tab into this "
              "directory (a run's: projector_config.pbtxt and projector/<step>/*.tsv).");
DEFINE_int64(projector_rows, 10000, "With --projector_dir: the most trained rows per table.");
DEFINE_string(csv_schema, "",
              "With --projector_dir: a CSV schema, to name rows by their raw values (default: "
              "the job's, when its file is still there).");
DEFINE_string(train_files, "",
              "With --projector_dir: the CSV files whose text names the rows (default: the "
              "job's train_files when the schema is the job's).");

namespace {

constexpr char kUsage[] =
    "usage: pstrain-ckpt <job_dir | path/to/model.ckpt-N[.index]> [--all_checkpoints]\n"
    "       pstrain-ckpt <job_dir | path/to/model.ckpt-N[.index]> --projector_dir=DIR "
    "[--projector_rows=N] [--csv_schema=FILE --train_files=PATTERNS]";

// The second form: the projector's files for the checkpoint at `index`.
int WriteProjectorFiles(pstrain::Env* env, const std::string& index) {
  pstrain::ProjectorOptions options;
  options.rows = FLAGS_projector_rows;
  std::unique_ptr<pstrain::CsvRowNamer> namer;
  std::string schema_path = FLAGS_csv_schema, train_files = FLAGS_train_files;
  if (schema_path.empty()) {
    // The job's own, as its checkpoint recorded them: a CSV job's rows are
    // named from its schema and files when they are still there.
    absl::StatusOr<pstrain::CheckpointIndex> read = pstrain::ReadCheckpointIndex(env, index);
    absl::StatusOr<pstrain::JobConfig> job =
        read.ok() ? pstrain::ParseJobConfig(read->hparams_yaml(), index)
                  : absl::StatusOr<pstrain::JobConfig>(read.status());
    if (job.ok() && !job->training.csv_schema.empty() &&
        env->FileExists(job->training.csv_schema)) {
      schema_path = job->training.csv_schema;
      if (train_files.empty()) train_files = job->training.train_files;
    }
  }
  if (!schema_path.empty()) {
    absl::StatusOr<pstrain::CsvSchema> schema = pstrain::LoadCsvSchema(env, schema_path);
    absl::StatusOr<std::vector<std::string>> files =
        train_files.empty()
            ? absl::InvalidArgumentError("--csv_schema names rows from --train_files: give them")
            : pstrain::ExpandFilePatterns(env, train_files, "--train_files");
    if (!schema.ok() || !files.ok()) {
      std::fprintf(stderr, "pstrain-ckpt: %s\n",
                   std::string((schema.ok() ? files.status() : schema.status()).message()).c_str());
      return 2;
    }
    namer = std::make_unique<pstrain::CsvRowNamer>(env, *std::move(schema), *std::move(files));
    options.name_rows = [&namer](std::vector<pstrain::RowsToName>* rows) { namer->Name(rows); };
  }
  absl::StatusOr<pstrain::ProjectorSummary> written =
      pstrain::WriteProjector(env, index, FLAGS_projector_dir, options);
  if (!written.ok()) {
    std::fprintf(stderr, "pstrain-ckpt: %s\n", written.status().ToString().c_str());
    return absl::IsInvalidArgument(written.status()) ? 2 : 1;
  }
  if (written->tables.empty()) {
    std::printf("%s: no embedding table with rows; nothing written\n", index.c_str());
    return 0;
  }
  std::printf("global step %lld: %s\n", static_cast<long long>(written->global_step),
              pstrain::JoinPath(FLAGS_projector_dir, pstrain::kProjectorConfigFile).c_str());
  for (const pstrain::ProjectorTable& t : written->tables) {
    std::printf("  %s: %lld of %lld rows (pushes %lld to %lld), %lld named, %s\n", t.name.c_str(),
                static_cast<long long>(t.rows), static_cast<long long>(t.rows_in_checkpoint),
                static_cast<long long>(t.max_pushes), static_cast<long long>(t.min_pushes),
                static_cast<long long>(t.named), t.tensor_path.c_str());
  }
  std::printf("%llu bytes\n", static_cast<unsigned long long>(written->bytes));
  return 0;
}

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
  if (!FLAGS_projector_dir.empty()) return WriteProjectorFiles(env, paths->front());
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
