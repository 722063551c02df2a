#ifndef FOLIO_COMMON_FLAGS_H_
#define FOLIO_COMMON_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace folio {

// Command-line flags for folio's binaries: `--name value` or `--name=value`
// (booleans: `--name`, `--name=true|false`, `--no-name`). Each flag also
// reads the environment variable FOLIO_<NAME> (upper case, '-' -> '_') as
// its default, so containers configure the same binary without a command
// line. Unknown flags and bad values are errors naming the flag.
//
// Thread-compatible: register, then Parse once.
class FlagSet {
 public:
  void String(const std::string& name, std::string* value, const std::string& help);
  void Int(const std::string& name, int64_t* value, const std::string& help);
  void Double(const std::string& name, double* value, const std::string& help);
  void Bool(const std::string& name, bool* value, const std::string& help);
  // Repeatable: every occurrence appends (the environment holds one value).
  void Strings(const std::string& name, std::vector<std::string>* values, const std::string& help);

  // Parses argv[first..argc); words that are not flags land in positional().
  absl::Status Parse(int argc, char** argv, int first = 1);
  const std::vector<std::string>& positional() const { return positional_; }
  // Whether Parse set flag `name` (from the command line or its environment
  // variable), as opposed to leaving its default.
  bool IsSet(const std::string& name) const;
  // One line per flag: name, default, help.
  std::string Help() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool is_bool = false;
    std::function<absl::Status(const std::string&)> set;
  };
  void Add(Flag flag);
  const Flag* Find(const std::string& name) const;

  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  std::vector<std::string> given_;  // names Parse set
};

// The environment variable that backs `name`: FOLIO_<NAME>.
std::string FlagEnvName(const std::string& name);

}  // namespace folio

#endif  // FOLIO_COMMON_FLAGS_H_
