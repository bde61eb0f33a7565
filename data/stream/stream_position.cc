#include "data/stream/stream_position.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pstrain {

std::string InputPosition::ToString() const {
  std::vector<std::string> files;
  for (const Open& o : open) files.push_back(absl::StrCat(o.file, ":", o.offset, ":", o.record));
  return absl::StrCat("epoch=", epoch, " next_file=", next_file, " window=", window,
                      " taken=", taken, listed > 0 ? absl::StrCat(" listed=", listed) : "",
                      " open=", absl::StrJoin(files, ","));
}

absl::StatusOr<InputPosition> InputPosition::FromString(std::string_view view) {
  const absl::string_view text(view.data(), view.size());
  InputPosition p;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("input position \"", text, "\": ", why));
  };
  int fields = 0;
  for (absl::string_view item : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) return bad(absl::StrCat("\"", item, "\" is not key=value"));
    const absl::string_view key = item.substr(0, eq);
    const absl::string_view value = item.substr(eq + 1);
    // Each key once: epoch, next_file, window, taken and open, and listed
    // if following.
    const int bit = key == "epoch"       ? 1
                    : key == "next_file" ? 2
                    : key == "window"    ? 4
                    : key == "taken"     ? 8
                    : key == "open"      ? 16
                    : key == "listed"    ? 32
                                         : 0;
    if (bit != 0 && (fields & bit) != 0) return bad(absl::StrCat(key, " twice"));
    fields |= bit;
    if (key == "open") {
      for (absl::string_view f : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        std::vector<absl::string_view> parts = absl::StrSplit(f, ':');
        Open o;
        if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &o.file) ||
            !absl::SimpleAtoi(parts[1], &o.offset) || !absl::SimpleAtoi(parts[2], &o.record) ||
            o.file < 0 || o.record < 0) {
          return bad(absl::StrCat("\"", f, "\" is not file:offset:record"));
        }
        p.open.push_back(o);
      }
      continue;
    }
    int64_t* target = key == "epoch"       ? &p.epoch
                      : key == "next_file" ? &p.next_file
                      : key == "window"    ? &p.window
                      : key == "taken"     ? &p.taken
                      : key == "listed"    ? &p.listed
                                           : nullptr;
    if (target == nullptr) return bad(absl::StrCat("unknown key \"", key, "\""));
    if (!absl::SimpleAtoi(value, target) || *target < 0) {
      return bad(absl::StrCat(key, " is not a count"));
    }
  }
  if ((fields & 31) != 31) return bad("needs epoch, next_file, window, taken and open");
  return p;
}

}  // namespace pstrain
