#ifndef PSTRAIN_DATA_TOOL_FLAG_PARSER_H_
#define PSTRAIN_DATA_TOOL_FLAG_PARSER_H_

#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"

namespace pstrain::data_tool {

// The flags of one pstrain-data subcommand: "--name value" pairs and
// "--name" switches (no value), in any order, a later one winning. Each flag
// is bound to the variable it sets, which keeps its default unless given.
// Parse is false on an unknown flag, a flag without its value, or a value
// that does not parse or lies outside its range; the subcommand then prints
// the usage (exit 2). The bound variables must outlive Parse.
class FlagParser {
 public:
  // --name TEXT: any text, even one that starts with "--".
  void String(std::string name, std::string* out);
  // --name a,b,c: the comma-separated items, empty ones left out.
  void List(std::string name, std::vector<std::string>* out);
  // --name N: a whole number of T's range within [min, max].
  template <typename T>
  void Int(std::string name, T* out, std::type_identity_t<T> min = std::numeric_limits<T>::min(),
           std::type_identity_t<T> max = std::numeric_limits<T>::max()) {
    Add(std::move(name), /*takes_value=*/true, [out, min, max](const std::string& text) {
      T v{};
      if (!absl::SimpleAtoi(text, &v) || v < min || v > max) return false;
      *out = v;
      return true;
    });
  }
  // --name X: any number absl::SimpleAtod reads (nan and inf too).
  void Double(std::string name, double* out);
  // --name X: a number in [min, max] (never a nan).
  void Double(std::string name, double* out, double min, double max);
  // --name: sets *out to true.
  void Switch(std::string name, bool* out);

  // Sets the bound variables from `args`, all of them flags and their values.
  bool Parse(std::span<const std::string> args) const;

 private:
  struct Flag {
    bool takes_value = true;
    std::function<bool(const std::string& value)> set;  // false: not a valid value
  };
  void Add(std::string name, bool takes_value, std::function<bool(const std::string&)> set);

  std::map<std::string, Flag, std::less<>> flags_;
};

}  // namespace pstrain::data_tool

#endif  // PSTRAIN_DATA_TOOL_FLAG_PARSER_H_
