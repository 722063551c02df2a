#include "common/flags.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace folio {
namespace {

absl::Status BadValue(const std::string& name, const std::string& value, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat("--", name, " needs ", want, ", got '", value, "'"));
}

}  // namespace

std::string FlagEnvName(const std::string& name) {
  std::string env = "FOLIO_";
  for (char c : name) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

void FlagSet::Add(Flag flag) { flags_.push_back(std::move(flag)); }

void FlagSet::String(const std::string& name, std::string* value, const std::string& help) {
  Add({name, help, *value, false, [value](const std::string& v) {
         *value = v;
         return absl::OkStatus();
       }});
}

void FlagSet::Int(const std::string& name, int64_t* value, const std::string& help) {
  Add({name, help, absl::StrCat(*value), false, [name, value](const std::string& v) {
         return absl::SimpleAtoi(v, value) ? absl::OkStatus() : BadValue(name, v, "an integer");
       }});
}

void FlagSet::Double(const std::string& name, double* value, const std::string& help) {
  Add({name, help, absl::StrCat(*value), false, [name, value](const std::string& v) {
         return absl::SimpleAtod(v, value) ? absl::OkStatus() : BadValue(name, v, "a number");
       }});
}

void FlagSet::Bool(const std::string& name, bool* value, const std::string& help) {
  Add({name, help, *value ? "true" : "false", true, [name, value](const std::string& v) {
         return absl::SimpleAtob(v, value) ? absl::OkStatus() : BadValue(name, v, "true or false");
       }});
}

void FlagSet::Strings(const std::string& name, std::vector<std::string>* values,
                      const std::string& help) {
  Add({name, help + " (repeatable)", "", false, [values](const std::string& v) {
         values->push_back(v);
         return absl::OkStatus();
       }});
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Parse(int argc, char** argv, int first) {
  // Environment first, so the command line wins.
  for (const Flag& f : flags_) {
    if (const char* env = std::getenv(FlagEnvName(f.name).c_str()); env != nullptr && *env != '\0') {
      if (absl::Status s = f.set(env); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(FlagEnvName(f.name), ": ", s.message()));
      }
      given_.push_back(f.name);
    }
  }
  for (int i = first; i < argc; ++i) {
    std::string word = argv[i];
    if (word.size() < 3 || word.rfind("--", 0) != 0) {
      positional_.push_back(std::move(word));
      continue;
    }
    std::string name = word.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr && !has_value && name.rfind("no-", 0) == 0) {
      const Flag* negated = Find(name.substr(3));
      if (negated != nullptr && negated->is_bool) {
        if (absl::Status s = negated->set("false"); !s.ok()) return s;
        given_.push_back(negated->name);
        continue;
      }
    }
    if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (!has_value) {
      if (flag->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    if (absl::Status s = flag->set(value); !s.ok()) return s;
    given_.push_back(flag->name);
  }
  return absl::OkStatus();
}

bool FlagSet::IsSet(const std::string& name) const {
  return std::find(given_.begin(), given_.end(), name) != given_.end();
}

std::string FlagSet::Help() const {
  std::string out;
  for (const Flag& f : flags_) {
    absl::StrAppend(&out, "  --", f.name, f.is_bool ? "" : " V", "  ", f.help);
    if (!f.default_text.empty()) absl::StrAppend(&out, " (default ", f.default_text, ")");
    absl::StrAppend(&out, "  [", FlagEnvName(f.name), "]\n");
  }
  return out;
}

}  // namespace folio
