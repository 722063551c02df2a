// Tests of ChatTemplate (common/chat_template.h): where the template comes
// from in a model directory, the special tokens, and rendering as
// transformers' apply_chat_template does it. Expected renders were computed
// with Python's jinja2 and transformers' continue_final_message logic.

#include "common/chat_template.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace folio {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kChatMl[] =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

class ChatTemplateLoadTest : public testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/chat_template_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
  }
  void WriteConfig(const Json& config) { Write("tokenizer_config.json", config.dump(2)); }

  std::string dir_;
};

TEST_F(ChatTemplateLoadTest, StringTemplateAndStringTokens) {
  WriteConfig({{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"chat_template", "{{ bos_token }}{{ messages[0].content }}"}});
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->source(), "{{ bos_token }}{{ messages[0].content }}");
  EXPECT_EQ((*t)->bos_token(), "<s>");
  EXPECT_EQ((*t)->eos_token(), "</s>");
  ChatTemplate::Input in;
  in.messages = Json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(*(*t)->Render(in), "<s>hi");
}

TEST_F(ChatTemplateLoadTest, ListPicksTheDefault) {
  WriteConfig({{"chat_template", Json::array({{{"name", "tool_use"}, {"template", "TOOLS"}},
                                              {{"name", "default"}, {"template", "DEFAULT"}},
                                              {{"name", "rag"}, {"template", "RAG"}}})}});
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->source(), "DEFAULT");
}

TEST_F(ChatTemplateLoadTest, ListWithoutDefaultNamesWhatExists) {
  WriteConfig({{"chat_template", Json::array({{{"name", "tool_use"}, {"template", "TOOLS"}},
                                              {{"name", "rag"}, {"template", "RAG"}}})}});
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("\"tool_use\", \"rag\""), absl::string_view::npos) << t.status();
  EXPECT_NE(t.status().message().find("tokenizer_config.json"), absl::string_view::npos) << t.status();
}

TEST_F(ChatTemplateLoadTest, ChatTemplateJinjaAndAddedTokens) {
  WriteConfig({{"bos_token", {{"__type", "AddedToken"}, {"content", "<|begin|>"}, {"lstrip", false}}},
               {"eos_token", {{"content", "<|end|>"}}}});
  Write("chat_template.jinja", "{{ bos_token }}x{{ eos_token }}\n");
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->bos_token(), "<|begin|>");
  EXPECT_EQ((*t)->eos_token(), "<|end|>");
  EXPECT_EQ(*(*t)->Render({}), "<|begin|>x<|end|>");  // jinja drops one trailing newline
}

TEST_F(ChatTemplateLoadTest, ChatTemplateJinjaWithoutConfig) {
  Write("chat_template.jinja", "[{{ bos_token is defined }}]");
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->bos_token(), "");
  // Unset special tokens are left out of the context, as transformers does.
  EXPECT_EQ(*(*t)->Render({}), "[False]");
}

TEST_F(ChatTemplateLoadTest, OverrideFileWins) {
  WriteConfig({{"chat_template", "CONFIG"}, {"eos_token", "</s>"}});
  Write("chat_template.jinja", "JINJA");
  Write("override.jinja", "OVERRIDE{{ eos_token }}");
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, dir_ + "/override.jinja");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->Render({}), "OVERRIDE</s>");
}

TEST_F(ChatTemplateLoadTest, ChatTemplateJinjaComesBeforeTheConfigs) {
  WriteConfig({{"chat_template", "CONFIG"}, {"eos_token", "</s>"}});
  Write("chat_template.jinja", "JINJA{{ eos_token }}");
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->Render({}), "JINJA</s>");  // as transformers loads them
}

TEST_F(ChatTemplateLoadTest, MissingOverrideFileIsNotFound) {
  WriteConfig({{"chat_template", "CONFIG"}});
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, dir_ + "/nope.jinja");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("nope.jinja"), absl::string_view::npos) << t.status();
}

TEST_F(ChatTemplateLoadTest, NoTemplateIsNotFound) {
  WriteConfig({{"bos_token", "<s>"}});
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("the model has no chat template"), absl::string_view::npos) << t.status();
  EXPECT_NE(t.status().message().find("pass --chat-template FILE"), absl::string_view::npos) << t.status();
  EXPECT_NE(t.status().message().find("chat_template.jinja"), absl::string_view::npos) << t.status();
}

TEST_F(ChatTemplateLoadTest, EmptyDirectoryIsNotFound) {
  EXPECT_EQ(ChatTemplate::Load(dir_, "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ChatTemplateLoadTest, SyntaxErrorsNameTheFileAndLine) {
  WriteConfig({{"chat_template", "line one\n{% if %}"}});
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(),
            dir_ + "/tokenizer_config.json: chat template line 2: Expected an expression, got 'end of statement block'");

  Write("override.jinja", "{{ x\n");
  t = ChatTemplate::Load(dir_, dir_ + "/override.jinja");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message().substr(0, dir_.size() + 15), dir_ + "/override.jinja") << t.status();
}

TEST_F(ChatTemplateLoadTest, BadConfigJsonNamesTheFile) {
  Write("tokenizer_config.json", "{ not json");
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Load(dir_, "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("tokenizer_config.json"), absl::string_view::npos) << t.status();
}

ChatTemplate::Input Conversation(Json final_assistant = nullptr) {
  ChatTemplate::Input in;
  in.messages = Json::array({{{"role", "user"}, {"content", "Q?"}}});
  if (!final_assistant.is_null()) in.messages.push_back({{"role", "assistant"}, {"content", final_assistant}});
  return in;
}

std::unique_ptr<ChatTemplate> Make(const std::string& source) {
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::FromString(source, "<s>", "</s>");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(ChatTemplateRenderTest, GenerationPromptAndContext) {
  std::unique_ptr<ChatTemplate> t = Make(kChatMl);
  ChatTemplate::Input in = Conversation();
  EXPECT_EQ(*t->Render(in), "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n");
  in.add_generation_prompt = false;
  EXPECT_EQ(*t->Render(in), "<|im_start|>user\nQ?<|im_end|>\n");

  // tools and documents are none, as transformers passes them.
  std::unique_ptr<ChatTemplate> probe =
      Make("{{ tools is defined }}{{ tools is none }}{{ documents is none }}{{ bos_token }}{{ eos_token }}");
  EXPECT_EQ(*probe->Render({}), "TrueTrueTrue<s></s>");
  ChatTemplate::Input with_tools;
  with_tools.tools = Json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  EXPECT_EQ(*Make("{{ tools[0].function.name }}{{ tools|tojson }}")->Render(with_tools),
            "f[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]");
}

TEST(ChatTemplateRenderTest, KwargsAddAndOverride) {
  std::unique_ptr<ChatTemplate> t =
      Make("{{ enable_thinking }}|{{ add_generation_prompt }}|{{ bos_token }}|{{ messages|length }}");
  ChatTemplate::Input in = Conversation();
  in.kwargs = {{"enable_thinking", false}, {"add_generation_prompt", "overridden"}, {"bos_token", "B"}};
  EXPECT_EQ(*t->Render(in), "False|overridden|B|1");
}

TEST(ChatTemplateRenderTest, ContinueFinalMessage) {
  std::unique_ptr<ChatTemplate> t = Make(kChatMl);
  ChatTemplate::Input in = Conversation("The answer is");
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(*t->Render(in), "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\nThe answer is");

  // The template keeps the trailing spaces: so does the prompt.
  in = Conversation("The answer is  ");
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(*t->Render(in), "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\nThe answer is  ");

  in = Conversation("  lead");
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(*t->Render(in), "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n  lead");

  // The last occurrence is the one continued.
  in = Conversation("Q?");
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(*t->Render(in), "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\nQ?");

  // The template trims the content: the prompt ends at the stripped text.
  std::unique_ptr<ChatTemplate> trimming =
      Make("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}");
  in = Conversation("  The answer is  ");
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(*trimming->Render(in), "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\nThe answer is");
}

TEST(ChatTemplateRenderTest, ContinueFinalMessageWithContentParts) {
  std::unique_ptr<ChatTemplate> t = Make(
      "{% for m in messages %}[{{ m.role }}]{% if m.content is string %}{{ m.content }}{% else %}"
      "{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{% endif %}[/]{% endfor %}");
  ChatTemplate::Input in = Conversation(Json::array({{{"type", "text"}, {"text", "Hi"}}, {{"type", "image"}}}));
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(*t->Render(in), "[user]Q?[/][assistant]Hi");

  in = Conversation(Json::array({{{"type", "image"}}}));
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(t->Render(in).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateRenderTest, ContinueFinalMessageErrors) {
  std::unique_ptr<ChatTemplate> t = Make(kChatMl);
  ChatTemplate::Input both = Conversation("x");
  both.add_generation_prompt = true;
  both.continue_final_message = true;
  absl::StatusOr<std::string> out = t->Render(both);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("not compatible"), absl::string_view::npos) << out.status();

  // A template that drops the content.
  std::unique_ptr<ChatTemplate> dropping = Make("{% for m in messages %}{{ m.role }}{% endfor %}");
  ChatTemplate::Input in = Conversation("The answer");
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  out = dropping->Render(in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("does not appear"), absl::string_view::npos) << out.status();

  ChatTemplate::Input empty;
  empty.add_generation_prompt = false;
  empty.continue_final_message = true;
  EXPECT_EQ(t->Render(empty).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateRenderTest, RaisedExceptionsPassThrough) {
  std::unique_ptr<ChatTemplate> t = Make(
      "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{{ m.content }}{% endfor %}");
  ChatTemplate::Input in;
  in.messages = Json::array({{{"role", "assistant"}, {"content", "a"}}});
  absl::StatusOr<std::string> out = t->Render(in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_TRUE(jinja::IsRaisedException(out.status()));

  // Other template errors are not "raised" and name the line.
  out = Make("a\n{{ messages[0].content + 1 }}")->Render(Conversation());
  ASSERT_FALSE(out.ok());
  EXPECT_FALSE(jinja::IsRaisedException(out.status()));
  EXPECT_EQ(out.status().message(), "chat template line 2: can only concatenate str (not \"int\") to str");
}

TEST(ChatTemplateRenderTest, FromStringSyntaxError) {
  absl::StatusOr<std::unique_ptr<ChatTemplate>> t = ChatTemplate::FromString("{% for %}", "", "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "chat template line 1: Expected an expression, got 'end of statement block'");
}

}  // namespace
}  // namespace folio
