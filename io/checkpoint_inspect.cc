#include "io/checkpoint_inspect.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "io/checkpoint.h"
#include "io/row_checkpoint.h"

namespace pstrain {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Number(double v) { return absl::StrFormat("%.6g", v); }

double L2Norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

// "norm N min A max B" of `v`.
std::string Summary(const std::vector<float>& v) {
  if (v.empty()) return "empty";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return absl::StrCat("norm ", Number(L2Norm(v)), "  min ", Number(*lo), "  max ", Number(*hi));
}

absl::Status CheckVariable(const std::string& index_path, const CheckpointIndex& index,
                           const CheckpointVariable& var) {
  const int64_t limit = var.trainable() ? index.num_params() : index.num_state();
  if (var.offset() < 0 || var.size() < 0 || var.offset() > limit - var.size()) {
    return absl::DataLossError(
        absl::StrCat(index_path, ": variable ", var.name(), " at [", var.offset(), ", ",
                     var.offset() + var.size(), ") is outside the ", limit,
                     var.trainable() ? " trainable parameters" : " state values"));
  }
  int64_t elements = 1;
  for (int64_t d : var.shape()) {
    if (d < 0 || (d > 0 && elements > std::numeric_limits<int64_t>::max() / d)) {
      elements = -1;
      break;
    }
    elements *= d;
  }
  if (elements != var.size()) {
    return absl::DataLossError(absl::StrCat(index_path, ": variable ", var.name(), " of shape [",
                                            absl::StrJoin(var.shape(), ", "), "] has size ",
                                            var.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CheckpointIndexPaths(Env* env, const std::string& path,
                                                              bool all) {
  std::string arg = path;
  while (arg.size() > 1 && arg.back() == '/') arg.pop_back();
  if (std::optional<int64_t> step = CheckpointStepOfName(BaseName(arg))) {
    const size_t slash = arg.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "" : arg.substr(0, slash + 1);
    std::string index = JoinPath(dir, IndexFileName(CheckpointPrefix(*step)));
    if (!env->FileExists(index)) {
      return absl::NotFoundError(absl::StrCat(index, " does not exist: no checkpoint ", arg));
    }
    return std::vector<std::string>{std::move(index)};
  }
  if (!env->FileExists(arg)) {
    return absl::NotFoundError(
        absl::StrCat(arg, " does not exist (expected a job dir or a model.ckpt-<N> prefix)"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps(env, arg));
  if (steps.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint (model.ckpt-<N>.index) in ", arg));
  }
  if (!all) steps.erase(steps.begin() + 1, steps.end());
  std::vector<std::string> paths;
  for (int64_t step : steps) paths.push_back(JoinPath(arg, IndexFileName(CheckpointPrefix(step))));
  return paths;
}

namespace {

// The embedding tables: rows and the L2 norm of their weights per table (as
// the index records them from the ps), after every rows file is read and
// checked against the index's size, CRC and row counts.
absl::StatusOr<std::string> InspectTables(Env* env, const std::string& dir,
                                          const CheckpointIndex& index) {
  const int n = index.tables_size();
  std::vector<int64_t> rows(n, 0);
  std::vector<double> sum_squares(n, 0.0);
  uint64_t bytes = 0;
  int files = 0;
  for (const CheckpointShardFile& entry : index.shards()) {
    if (entry.rows_file().empty()) continue;
    const std::string path = JoinPath(dir, entry.rows_file());
    PSTRAIN_ASSIGN_OR_RETURN(std::string contents, env->ReadFile(path));
    if (contents.size() != entry.rows_size_bytes() ||
        crc32c::Value(contents.data(), contents.size()) != entry.rows_crc32c()) {
      return absl::DataLossError(
          absl::StrCat(path, ": size or CRC differs from the checkpoint's index"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        RowFileContents file,
        ParseRowFile(contents, path,
                     [](int, int64_t, absl::Span<const float>, absl::Span<const float>, int64_t,
                        int64_t) { return absl::OkStatus(); }));
    if (static_cast<int>(file.rows.size()) != n || entry.table_rows_size() != n ||
        entry.table_sum_squares_size() != n) {
      return absl::DataLossError(
          absl::StrCat(path, ": holds ", file.rows.size(), " tables, the index has ", n));
    }
    for (int t = 0; t < n; ++t) {
      if (file.rows[t] != entry.table_rows(t)) {
        return absl::DataLossError(absl::StrCat(path, ": table ", index.tables(t).name(), " has ",
                                                file.rows[t], " rows, the index says ",
                                                entry.table_rows(t)));
      }
      rows[t] += file.rows[t];
      sum_squares[t] += entry.table_sum_squares(t);
    }
    bytes += entry.rows_size_bytes();
    ++files;
  }
  std::string out = absl::StrCat("embedding tables (", index.table_optimizer(), "):\n");
  size_t width = 0;
  for (const CheckpointTable& t : index.tables()) width = std::max(width, t.name().size());
  for (int t = 0; t < n; ++t) {
    const CheckpointTable& table = index.tables(t);
    absl::StrAppend(&out, "  ",
                    absl::StrFormat("%-*s  dim %d, %s: %d rows, L2 norm %s\n",
                                    static_cast<int>(width), table.name(), table.dim(),
                                    table.buckets() > 0 ? absl::StrCat(table.buckets(), " buckets")
                                                        : std::string("dynamic"),
                                    rows[t], Number(std::sqrt(sum_squares[t]))));
  }
  absl::StrAppend(&out, "checksums: ", files, " rows files OK (",
                  absl::StrFormat("%.2f", static_cast<double>(bytes) / (1 << 20)), " MiB)\n");
  return out;
}

}  // namespace

absl::StatusOr<std::string> InspectCheckpoint(Env* env, const std::string& index_path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                           CheckpointReader::Open(env, index_path));
  const CheckpointIndex& index = reader->index();
  absl::string_view prefix = index_path;
  absl::ConsumeSuffix(&prefix, ".index");

  std::string out = absl::StrCat("checkpoint: ", prefix, "\n");
  absl::StrAppend(&out, "global step: ", index.global_step(), "\n");
  absl::StrAppend(&out, "model: ", index.model(), "\n");
  if (!index.model_spec().empty()) {
    // Every layer of the spec is one line of it, under "layers:".
    const std::string& spec = index.model_spec();
    const size_t layers = spec.find("\nlayers:\n");
    const int64_t count =
        layers == std::string::npos
            ? 0
            : std::count(spec.begin() + static_cast<int64_t>(layers) + 9, spec.end(), '\n');
    absl::StrAppend(&out, "model spec: ", count, " layers, in the index (pstrain-export builds ",
                    "the model from it)\n");
  }
  absl::StrAppend(&out, "optimizer: ", index.optimizer());
  if (index.slot_names_size() > 0) {
    absl::StrAppend(&out, " (slots: ", absl::StrJoin(index.slot_names(), ", "), ")");
  }
  absl::StrAppend(&out, "\nshards: ", index.shards_size(), " (written by ", index.shards_size(),
                  " ps)\n");
  absl::StrAppend(
      &out, "written: ",
      index.unix_time() == 0
          ? std::string("unknown")
          : absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(index.unix_time()),
                             absl::UTCTimeZone()),
      "\n");
  absl::StrAppend(&out, "values: ", index.num_params(), " trainable, ", index.num_state(),
                  " state, in ", index.variables_size(), " variables\n");

  // Reading the state also checks that the first shard file holds it.
  std::vector<float> state(static_cast<size_t>(index.num_state()));
  PSTRAIN_RETURN_IF_ERROR(reader->ReadState(state.data()));

  size_t name_width = 0, shape_width = 0;
  std::vector<std::string> shapes;
  for (const CheckpointVariable& var : index.variables()) {
    PSTRAIN_RETURN_IF_ERROR(CheckVariable(index_path, index, var));
    shapes.push_back(absl::StrCat("[", absl::StrJoin(var.shape(), ", "), "]"));
    name_width = std::max(name_width, var.name().size());
    shape_width = std::max(shape_width, shapes.back().size());
  }
  std::vector<float> values;
  std::vector<std::vector<float>> slots(index.slot_names_size());
  for (int i = 0; i < index.variables_size(); ++i) {
    const CheckpointVariable& var = index.variables(i);
    const size_t n = static_cast<size_t>(var.size());
    absl::StrAppend(&out, "  ",
                    absl::StrFormat("%-*s  %-*s  ", static_cast<int>(name_width), var.name(),
                                    static_cast<int>(shape_width), shapes[i]));
    if (!var.trainable()) {
      values.assign(state.begin() + var.offset(), state.begin() + var.offset() + var.size());
      absl::StrAppend(&out, "(state)  ", Summary(values), "\n");
      continue;
    }
    values.resize(n);
    std::vector<float*> slot_ptrs;
    for (std::vector<float>& slot : slots) {
      slot.resize(n);
      slot_ptrs.push_back(slot.data());
    }
    PSTRAIN_RETURN_IF_ERROR(
        reader->ReadRange(var.offset(), var.offset() + var.size(), values.data(), slot_ptrs)
            .status());
    absl::StrAppend(&out, Summary(values));
    for (int k = 0; k < index.slot_names_size(); ++k) {
      absl::StrAppend(&out, k == 0 ? "  " : " ", index.slot_names(k), " ",
                      Number(L2Norm(slots[k])));
    }
    absl::StrAppend(&out, "\n");
  }

  // Every shard file, whether or not a variable lies in it: the reader checks
  // a file's size and CRC against the index when a range first touches it,
  // and a shard with an empty range is read directly.
  uint64_t bytes = 0;
  const std::string dir = DirName(index_path);
  for (const CheckpointShardFile& entry : index.shards()) {
    bytes += entry.size_bytes();
    if (entry.end() > entry.begin()) {
      float first = 0;
      PSTRAIN_RETURN_IF_ERROR(
          reader->ReadRange(entry.begin(), entry.begin() + 1, &first, {}).status());
      continue;
    }
    const std::string path = JoinPath(dir, entry.file());
    PSTRAIN_ASSIGN_OR_RETURN(ShardValues shard, ReadCheckpointShard(env, path, &entry));
    if (shard.begin != entry.begin() || shard.end != entry.end() || shard.model != index.model()) {
      return absl::DataLossError(absl::StrCat(path, ": does not match the checkpoint's index"));
    }
  }
  absl::StrAppend(&out, "checksums: ", index.shards_size(), " shard files OK (",
                  absl::StrFormat("%.2f", static_cast<double>(bytes) / (1 << 20)), " MiB)\n");
  if (index.tables_size() > 0) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string tables, InspectTables(env, dir, index));
    absl::StrAppend(&out, tables);
  }
  return out;
}

}  // namespace pstrain
