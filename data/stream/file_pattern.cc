#include "data/stream/file_pattern.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Every file under `base` whose components match `components` (globs or
// plain names), appended to `out` in name order.
absl::Status Expand(Env* env, const std::string& base, const std::vector<std::string>& components,
                    size_t next, std::vector<std::string>* out) {
  if (next == components.size()) {
    out->push_back(base);
    return absl::OkStatus();
  }
  const std::string& component = components[next];
  const auto join = [&](const std::string& name) {
    return base.empty() ? name : base == "/" ? "/" + name : JoinPath(base, name);
  };
  if (!IsGlob(component)) {
    const std::string path = join(component);
    // Only the last component must exist as a file; a directory on the way
    // shows up by what is under it.
    if (next + 1 == components.size() && !env->FileExists(path)) return absl::OkStatus();
    return Expand(env, path, components, next + 1, out);
  }
  absl::StatusOr<std::vector<std::string>> names = env->ListDir(base.empty() ? "." : base);
  if (!names.ok()) {
    // A directory that is not there holds no match.
    if (absl::IsNotFound(names.status())) return absl::OkStatus();
    return names.status();
  }
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) {
    if (::fnmatch(component.c_str(), name.c_str(), FNM_PERIOD) != 0) continue;
    PSTRAIN_RETURN_IF_ERROR(Expand(env, join(name), components, next + 1, out));
  }
  return absl::OkStatus();
}

// The files one entry names, in name order.
absl::StatusOr<std::vector<std::string>> ExpandOne(Env* env, const std::string& entry) {
  std::vector<std::string> files;
  if (!IsGlob(entry)) {
    if (env->FileExists(entry)) files.push_back(entry);
    return files;
  }
  // The part before the first component with a glob is where listing starts.
  std::string base;
  std::string rest = entry;
  if (absl::StartsWith(entry, "gs://")) {
    const size_t bucket_end = entry.find('/', 5);
    if (bucket_end == std::string::npos || IsGlob(entry.substr(0, bucket_end))) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ": a pattern must name its bucket (gs://bucket/path-*)"));
    }
    base = entry.substr(0, bucket_end);
    rest = entry.substr(bucket_end + 1);
  } else if (absl::StartsWith(entry, "/")) {
    base.assign(1, '/');
    rest = entry.substr(1);
  }
  std::vector<std::string> components = absl::StrSplit(rest, '/', absl::SkipEmpty());
  size_t first_glob = 0;
  while (first_glob < components.size() && !IsGlob(components[first_glob])) {
    base = base.empty()  ? components[first_glob]
           : base == "/" ? "/" + components[first_glob]
                         : JoinPath(base, components[first_glob]);
    ++first_glob;
  }
  components.erase(components.begin(), components.begin() + first_glob);
  PSTRAIN_RETURN_IF_ERROR(Expand(env, base, components, 0, &files));
  return files;
}

}  // namespace

bool IsGlob(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

absl::StatusOr<std::vector<std::string>> ExpandFilePatterns(Env* env, std::string_view patterns,
                                                            std::string_view what) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  int entries = 0;
  for (absl::string_view piece : absl::StrSplit(absl::string_view(patterns.data(), patterns.size()),
                                                ',', absl::SkipWhitespace())) {
    const std::string entry(absl::StripAsciiWhitespace(piece));
    ++entries;
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> matched, ExpandOne(env, entry));
    if (matched.empty()) {
      return absl::NotFoundError(absl::StrCat(
          absl::string_view(what.data(), what.size()), ": ",
          IsGlob(entry) ? absl::StrCat("no file matches ", entry)
                        : absl::StrCat(entry, " does not exist"),
          "; give existing files: a path, a glob (train-*.tfrecord.gz) or a comma-separated "
          "list, local or gs://"));
    }
    for (std::string& file : matched) {
      if (seen.insert(file).second) files.push_back(std::move(file));
    }
  }
  if (entries == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::string_view(what.data(), what.size()), " names no file"));
  }
  return files;
}

}  // namespace pstrain
