#include "data/tool/flag_parser.h"

#include <utility>

#include "absl/strings/str_split.h"

namespace pstrain::data_tool {

void FlagParser::Add(std::string name, bool takes_value,
                     std::function<bool(const std::string&)> set) {
  flags_[std::move(name)] = Flag{takes_value, std::move(set)};
}

void FlagParser::String(std::string name, std::string* out) {
  Add(std::move(name), /*takes_value=*/true, [out](const std::string& text) {
    *out = text;
    return true;
  });
}

void FlagParser::List(std::string name, std::vector<std::string>* out) {
  Add(std::move(name), /*takes_value=*/true, [out](const std::string& text) {
    *out = absl::StrSplit(text, ',', absl::SkipEmpty());
    return true;
  });
}

void FlagParser::Double(std::string name, double* out) {
  Add(std::move(name), /*takes_value=*/true,
      [out](const std::string& text) { return absl::SimpleAtod(text, out); });
}

void FlagParser::Double(std::string name, double* out, double min, double max) {
  Add(std::move(name), /*takes_value=*/true, [out, min, max](const std::string& text) {
    double v = 0;
    if (!absl::SimpleAtod(text, &v) || !(v >= min && v <= max)) return false;
    *out = v;
    return true;
  });
}

void FlagParser::Switch(std::string name, bool* out) {
  Add(std::move(name), /*takes_value=*/false, [out](const std::string&) {
    *out = true;
    return true;
  });
}

bool FlagParser::Parse(std::span<const std::string> args) const {
  for (size_t i = 0; i < args.size();) {
    const auto it = flags_.find(args[i]);
    if (it == flags_.end()) return false;
    const Flag& flag = it->second;
    if (!flag.takes_value) {
      if (!flag.set("")) return false;
      i += 1;
      continue;
    }
    if (i + 1 >= args.size() || !flag.set(args[i + 1])) return false;
    i += 2;
  }
  return true;
}

}  // namespace pstrain::data_tool
