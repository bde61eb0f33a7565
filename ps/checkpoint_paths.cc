#include "ps/checkpoint_paths.h"

#include <limits.h>
#include <stdlib.h>

#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "io/checkpoint.h"

namespace pstrain {
namespace {

// `path` with "//" and "/." collapsed and no trailing '/'; nullopt if it has
// a ".." component (never followed).
std::optional<std::string> Clean(const std::string& path) {
  absl::string_view rest = path;
  std::string scheme;
  if (absl::StartsWith(path, "gs://")) {
    scheme = "gs://";
    rest.remove_prefix(5);
  }
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(rest, '/')) {
    if (part == "..") return std::nullopt;
    if (part.empty() || part == ".") continue;
    parts.push_back(part);
  }
  const bool absolute = scheme.empty() && absl::StartsWith(path, "/");
  return absl::StrCat(scheme, absolute ? "/" : "", absl::StrJoin(parts, "/"));
}

std::optional<std::string> RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return std::nullopt;
  return std::string(resolved);
}

bool SameDirectory(const std::string& dir, const std::string& job_dir) {
  const std::optional<std::string> a = Clean(dir), b = Clean(job_dir);
  if (!a.has_value() || !b.has_value()) return false;
  if (*a == *b) return true;
  if (absl::StartsWith(*a, "gs://") || absl::StartsWith(*b, "gs://")) return false;
  const std::optional<std::string> real_a = RealPath(*a), real_b = RealPath(*b);
  return real_a.has_value() && real_b.has_value() && *real_a == *real_b;
}

}  // namespace

absl::StatusOr<std::string> CheckpointPathInJobDir(const std::string& job_dir,
                                                   const std::string& given,
                                                   CheckpointPathKind kind, const char* what) {
  const char* expected =
      kind == CheckpointPathKind::kPrefix ? "model.ckpt-N" : "model.ckpt-N.index";
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", absl::CEscape(given), "\" ", why,
                     "; a ps reads and writes only checkpoints "
                     "in its job dir ",
                     job_dir.empty() ? "(none was given to it)" : job_dir, ": give ", expected,
                     " or a path to it in the job dir (nothing was read or written)"));
  };
  if (job_dir.empty()) return refuse("cannot be checked");
  if (given.find('\0') != std::string::npos) return refuse("holds a NUL byte");
  const size_t slash = given.find_last_of('/');
  const std::string name = slash == std::string::npos ? given : given.substr(slash + 1);
  const std::optional<int64_t> step = CheckpointStepOfName(name);
  const std::string want = step.has_value() ? (kind == CheckpointPathKind::kPrefix
                                                   ? CheckpointPrefix(*step)
                                                   : IndexFileName(CheckpointPrefix(*step)))
                                            : std::string();
  if (!step.has_value() || name != want) {
    return refuse(absl::StrCat("does not name a checkpoint (", expected, ")"));
  }
  if (slash != std::string::npos && !SameDirectory(given.substr(0, slash), job_dir)) {
    return refuse("is not in the job dir (a path through \"..\" or a subdirectory never is)");
  }
  return JoinPath(job_dir, name);
}

}  // namespace pstrain
