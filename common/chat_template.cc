#include "common/chat_template.h"

#include <sys/stat.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/jinja/text.h"
#include "common/text_file.h"

namespace folio {
namespace {

using Json = nlohmann::ordered_json;

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A special token as tokenizer_config.json spells it: a string, or an
// AddedToken object whose "content" is the text.
std::string TokenText(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return "";
}

// Python's str.lstrip() / str.strip(), as transformers applies them.
std::string_view LStrip(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos;
    if (!jinja::text::IsSpace(jinja::text::Decode(s, &next))) break;
    pos = next;
  }
  return s.substr(pos);
}

std::string_view Strip(std::string_view s) {
  s = LStrip(s);
  size_t keep = 0, pos = 0;
  while (pos < s.size()) {
    if (!jinja::text::IsSpace(jinja::text::Decode(s, &pos))) keep = pos;
  }
  return s.substr(0, keep);
}

absl::StatusOr<std::unique_ptr<jinja::Template>> ParseNamed(const std::string& source, const std::string& where) {
  absl::StatusOr<std::unique_ptr<jinja::Template>> t = jinja::Template::Parse(source);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(where, ": ", t.status().message()));
  return t;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token,
                           std::unique_ptr<jinja::Template> tmpl)
    : source_(std::move(source)),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      template_(std::move(tmpl)) {}

ChatTemplate::~ChatTemplate() = default;

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Load(const std::string& model_dir,
                                                                 const std::string& override_file) {
  const std::string config_path = model_dir + "/tokenizer_config.json";
  const std::string jinja_path = model_dir + "/chat_template.jinja";
  Json config = Json::object();
  if (!model_dir.empty() && FileExists(config_path)) {
    absl::StatusOr<std::string> text = ReadTextFile(config_path);
    if (!text.ok()) return text.status();
    try {
      config = Json::parse(*text);
    } catch (const Json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": invalid JSON: ", e.what()));
    }
    if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(config_path, ": not a JSON object"));
  }
  std::string bos = TokenText(config, "bos_token");
  std::string eos = TokenText(config, "eos_token");

  std::string source;
  std::string where;
  if (!override_file.empty()) {
    absl::StatusOr<std::string> text = ReadTextFile(override_file);
    if (!text.ok()) return text.status();
    source = *std::move(text);
    where = override_file;
  } else if (!model_dir.empty() && FileExists(jinja_path)) {
    // transformers writes the template here and reads it before the config's.
    absl::StatusOr<std::string> text = ReadTextFile(jinja_path);
    if (!text.ok()) return text.status();
    source = *std::move(text);
    where = jinja_path;
  } else if (auto it = config.find("chat_template"); it != config.end() && !it->is_null()) {
    where = config_path;
    if (it->is_string()) {
      source = it->get<std::string>();
    } else if (it->is_array()) {
      std::vector<std::string> names;
      bool found = false;
      for (const Json& entry : *it) {
        if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(config_path, ": chat_template list entries must be {\"name\", \"template\"} objects"));
        }
        std::string name = entry["name"].get<std::string>();
        if (name == "default") {
          if (!entry.contains("template") || !entry["template"].is_string()) {
            return absl::InvalidArgumentError(
                absl::StrCat(config_path, ": chat_template \"default\" has no \"template\" string"));
          }
          source = entry["template"].get<std::string>();
          found = true;
          break;
        }
        names.push_back(absl::StrCat("\"", name, "\""));
      }
      if (!found) {
        return absl::NotFoundError(absl::StrCat(config_path, ": chat_template has no template named \"default\" (it has ",
                                                names.empty() ? "none" : absl::StrJoin(names, ", "),
                                                "); pass --chat-template FILE"));
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(config_path, ": chat_template must be a string or a list of {\"name\", \"template\"}"));
    }
  } else {
    return absl::NotFoundError(absl::StrCat("the model has no chat template (no \"chat_template\" in ", config_path,
                                            " and no ", jinja_path, "); pass --chat-template FILE"));
  }
  absl::StatusOr<std::unique_ptr<jinja::Template>> tmpl = ParseNamed(source, where);
  if (!tmpl.ok()) return tmpl.status();
  return std::unique_ptr<ChatTemplate>(
      new ChatTemplate(std::move(source), std::move(bos), std::move(eos), *std::move(tmpl)));
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromString(std::string source, std::string bos_token,
                                                                       std::string eos_token) {
  absl::StatusOr<std::unique_ptr<jinja::Template>> tmpl = jinja::Template::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  return std::unique_ptr<ChatTemplate>(
      new ChatTemplate(std::move(source), std::move(bos_token), std::move(eos_token), *std::move(tmpl)));
}

absl::StatusOr<std::string> ChatTemplate::Render(const Input& input) const {
  if (input.continue_final_message && input.add_generation_prompt) {
    return absl::InvalidArgumentError(
        "continue_final_message and add_generation_prompt are not compatible: use continue_final_message to "
        "continue the final message, add_generation_prompt to start a new assistant message");
  }
  if (!input.kwargs.is_object() && !input.kwargs.is_null()) {
    return absl::InvalidArgumentError("chat_template_kwargs must be a JSON object");
  }
  std::string final_text;
  if (input.continue_final_message) {
    if (!input.messages.is_array() || input.messages.empty() || !input.messages.back().is_object()) {
      return absl::InvalidArgumentError("continue_final_message is set but there is no final message to continue");
    }
    const Json& content = input.messages.back().value("content", Json());
    bool found = false;
    if (content.is_string()) {
      final_text = content.get<std::string>();
      found = true;
    } else if (content.is_array()) {
      // the last block with text, as transformers picks it
      for (auto it = content.rbegin(); it != content.rend(); ++it) {
        if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
          final_text = (*it)["text"].get<std::string>();
          found = true;
          break;
        }
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(
          "continue_final_message is set but we could not find any text to continue in the final message");
    }
  }

  Json context = Json::object();
  context["messages"] = input.messages;
  context["tools"] = input.tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = input.add_generation_prompt;
  if (!bos_token_.empty()) context["bos_token"] = bos_token_;
  if (!eos_token_.empty()) context["eos_token"] = eos_token_;
  if (input.kwargs.is_object()) {
    for (auto it = input.kwargs.begin(); it != input.kwargs.end(); ++it) context[it.key()] = it.value();
  }
  absl::StatusOr<std::string> rendered = template_->Render(context);
  if (!rendered.ok() || !input.continue_final_message) return rendered;

  const std::string& text = *rendered;
  std::string_view stripped = Strip(final_text);
  size_t loc = text.rfind(stripped);
  if (loc == std::string::npos) {
    return absl::InvalidArgumentError(
        "continue_final_message is set but the final message does not appear in the chat after applying the chat "
        "template (the template changes or drops part of it)");
  }
  std::string_view lstripped = LStrip(final_text);
  if (std::string_view(text).substr(loc, lstripped.size()) == final_text) {
    return text.substr(0, loc + lstripped.size());  // the template kept the spacing (or there was none)
  }
  return text.substr(0, loc + stripped.size());
}

}  // namespace folio
