#include "config/config_yaml_util.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"

namespace pstrain {
namespace config_internal {
namespace {

// Levenshtein distance, ASCII case-insensitive.
int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      const bool same = absl::ascii_tolower(static_cast<unsigned char>(a[i - 1])) ==
                        absl::ascii_tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean X?)" for the closest of `known` within distance 2, else "".
std::string Suggestion(std::string_view key, const std::vector<std::string>& known) {
  constexpr int kMaxDistance = 2;
  const std::string* best = nullptr;
  int best_distance = kMaxDistance + 1;
  for (const std::string& name : known) {
    const int d = EditDistance(key, name);
    if (d < best_distance) {
      best = &name;
      best_distance = d;
    }
  }
  return best == nullptr ? "" : absl::StrCat(" (did you mean ", *best, "?)");
}

}  // namespace

std::string Quoted(std::string_view value) {
  return absl::StrCat("\"", absl::CHexEscape(Sv(value)), "\"");
}

std::string UnknownKeyMessage(std::string_view path_prefix, std::string_view key,
                              const std::vector<std::string>& known) {
  return absl::StrCat("unknown key ", Sv(path_prefix), Sv(key), Suggestion(key, known));
}

absl::Status ErrorAt(const Source& source, const YAML::Node& node, absl::string_view message) {
  std::string line;
  const YAML::Mark mark = node.Mark();
  if (source.show_lines && !mark.is_null()) line = absl::StrCat(", line ", mark.line + 1);
  return absl::InvalidArgumentError(absl::StrCat(source.name, ": ", message, line));
}

absl::StatusOr<YAML::Node> LoadYaml(std::string_view text, std::string_view source,
                                    std::string_view syntax) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": ", Sv(syntax),
                                                   " syntax error at line ", e.mark.line + 1,
                                                   ", column ", e.mark.column + 1, ": ", e.msg));
  }
}

// The scalar text of `node`; "" for null (a key with no value).
absl::StatusOr<std::string> ScalarOf(const Source& source, const YAML::Node& node,
                                     std::string_view path) {
  if (node.IsNull()) return std::string();
  if (!node.IsScalar()) {
    return ErrorAt(source, node,
                   absl::StrCat(Sv(path), " must be a single value, not a list or map"));
  }
  return node.Scalar();
}

std::string ChildPath(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(Sv(path), ".", Sv(key));
}

absl::Status KeyGivenTwice(const Source& source, std::string_view path, std::string_view key,
                           const YAML::Mark& first, const YAML::Node& again) {
  std::string where;
  if (source.show_lines && !first.is_null())
    where = absl::StrCat(" (first at line ", first.line + 1, ")");
  return ErrorAt(source, again, absl::StrCat(ChildPath(path, key), " is given twice", where));
}

}  // namespace config_internal
}  // namespace pstrain
