#ifndef FOLIO_COMMON_CHAT_TEMPLATE_H_
#define FOLIO_COMMON_CHAT_TEMPLATE_H_

// A model's chat template (Hugging Face `chat_template`), loaded and
// rendered the way transformers' apply_chat_template does it, on top of
// folio's Jinja renderer (common/jinja/template.h).
//
// Thread-safety: immutable after Load/FromString; Render is const and may
// run on many threads at once.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/jinja/template.h"
#include "nlohmann/json.hpp"

namespace folio {

class ChatTemplate {
 public:
  // The template: `override_file` if non-empty (its whole text), else
  // model_dir/chat_template.jinja (transformers reads it first), else
  // model_dir/tokenizer_config.json "chat_template" (a string, or a list of
  // {"name","template"} objects: the one named "default"; with none named
  // default, NOT_FOUND saying which names exist). NOT_FOUND "the model has no chat template
  // (…); pass --chat-template FILE" when none exists. bos_token / eos_token
  // from tokenizer_config.json: a string or an AddedToken object
  // {"content": …}; absent -> "". Errors name the file (and the template
  // line for syntax errors).
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Load(const std::string& model_dir,
                                                            const std::string& override_file);
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromString(std::string source, std::string bos_token,
                                                                  std::string eos_token);

  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;
  ~ChatTemplate();

  struct Input {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // as the client sent them (OpenAI shape)
    // null: the template sees `tools` as none, as transformers passes it
    // (tools=None; documents=None likewise).
    nlohmann::ordered_json tools;
    bool add_generation_prompt = true;
    bool continue_final_message = false;
    // chat_template_kwargs: extra top-level variables; they may override
    // anything (messages and add_generation_prompt too), as vLLM merges them.
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  };

  // Renders messages, tools, documents (none), add_generation_prompt,
  // bos_token and eos_token (each left out when empty, as transformers
  // leaves out unset special tokens) plus kwargs.
  // continue_final_message as transformers' apply_chat_template does it:
  // render with add_generation_prompt false, then cut the text after the
  // final message's content (rindex of the stripped content; its trailing
  // whitespace kept only if the template kept it). Both flags set together
  // is INVALID_ARGUMENT; a final message whose text does not appear is
  // INVALID_ARGUMENT. Errors from the template pass through
  // (jinja::IsRaisedException still holds for raise_exception).
  absl::StatusOr<std::string> Render(const Input& input) const;

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token,
               std::unique_ptr<jinja::Template> tmpl);

  const std::string source_;
  const std::string bos_token_;
  const std::string eos_token_;
  const std::unique_ptr<const jinja::Template> template_;
};

}  // namespace folio

#endif  // FOLIO_COMMON_CHAT_TEMPLATE_H_
