// Tokenizer::LoadFromFile: reads a tokenizer.json (the Loader below) into a
// Tokenizer; the encoding and decoding are in tokenizer.cc.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/byte_level.h"
#include "common/metaspace.h"
#include "common/tokenizer.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using json = nlohmann::json;

// Ids above this are taken as a corrupt file rather than a real vocabulary.
constexpr int64_t kMaxTokenId = int64_t{1} << 24;

}  // namespace

// Reads tokenizer.json into a Tokenizer. Every error names the file and field.
class Tokenizer::Loader {
 public:
  Loader(const std::string& path, Tokenizer* t) : path_(path), t_(t) {}

  absl::Status Load(const json& j) {
    if (!j.is_object()) return Invalid("(top level)", "expected a JSON object");
    t_->utf8_vocab_ = SpelledInUtf8(j);
    if (auto s = LoadNormalizer(Field(j, "normalizer"), "normalizer"); !s.ok()) return s;
    if (auto s = LoadDecoder(Field(j, "decoder"), "decoder"); !s.ok()) return s;
    if (!j.contains("model")) return Invalid("model", "missing");
    if (auto s = LoadModel(j["model"]); !s.ok()) return s;
    if (auto s = LoadAddedTokens(Field(j, "added_tokens")); !s.ok()) return s;
    if (auto s = LoadPostProcessor(Field(j, "post_processor"), "post_processor"); !s.ok()) return s;
    return LoadPreTokenizer(Field(j, "pre_tokenizer"), "pre_tokenizer");
  }

 private:
  absl::Status Invalid(std::string_view field, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": field ", std::string(field), ": ", std::string(what)));
  }
  // j[key] without copying, or null when absent.
  static const json& Field(const json& j, const char* key) {
    static const json* const kNull = new json();
    if (!j.is_object()) return *kNull;
    auto it = j.find(key);
    return it == j.end() ? *kNull : *it;
  }
  static std::string TypeOf(const json& j) {
    return j.is_object() && j.contains("type") && j["type"].is_string()
               ? j["type"].get<std::string>()
               : std::string();
  }

  // The special tokens a TemplateProcessing puts around a single text
  // ("single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}]),
  // their ids from its "special_tokens" map (else the vocab). A Sequence of
  // processors is searched; ByteLevel and the others add nothing here.
  absl::Status LoadPostProcessor(const json& p, const std::string& field) {
    const std::string type = TypeOf(p);
    if (type == "Sequence") {
      return ForEachIn(p, "processors", field, [&](const json& e, const std::string& sub) {
        return LoadPostProcessor(e, sub);
      });
    }
    if (type != "TemplateProcessing") return absl::OkStatus();
    const json& single = Field(p, "single");
    if (!single.is_array()) return Invalid(field + ".single", "expected an array");
    bool after_text = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string item = absl::StrCat(field, ".single[", i, "]");
      if (single[i].contains("Sequence")) {
        after_text = true;
        continue;
      }
      const json& special = Field(single[i], "SpecialToken");
      if (!special.is_object() || !special.contains("id") || !special["id"].is_string())
        return Invalid(item, "expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
      const std::string name = special["id"].get<std::string>();
      std::vector<TokenId> ids;
      const json& known = Field(Field(p, "special_tokens"), name.c_str());
      if (known.is_object() && known.contains("ids") && known["ids"].is_array()) {
        for (const json& id : known["ids"]) {
          if (!id.is_number_integer()) return Invalid(item, "special token ids must be integers");
          ids.push_back(id.get<TokenId>());
        }
      } else if (std::optional<TokenId> id = t_->FindToken(name)) {
        ids.push_back(*id);
      } else {
        return Invalid(item, absl::StrCat("special token '", name, "' is not in the vocabulary"));
      }
      std::vector<TokenId>& out = after_text ? t_->prompt_suffix_ : t_->prompt_prefix_;
      out.insert(out.end(), ids.begin(), ids.end());
    }
    return absl::OkStatus();
  }

  // Loads each element of a Sequence's list `key` with load(element, its field name).
  template <class Load>
  absl::Status ForEachIn(const json& sequence, const char* key, const std::string& field,
                         Load load) {
    const json& list = Field(sequence, key);
    const std::string name = absl::StrCat(field, ".", key);
    if (!list.is_array()) return Invalid(name, "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto s = load(list[i], absl::StrCat(name, "[", i, "]")); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // SentencePiece-style files spell the vocab in UTF-8 ("▁the"), byte-level
  // ones map every byte to a printable character ("Ġthe"). A ByteLevel
  // pre-tokenizer or decoder says byte-level; otherwise byte fallback or a
  // SentencePiece normalizer, pre-tokenizer or decoder says UTF-8.
  static bool SpelledInUtf8(const json& j) {
    bool byte_level = false, sentencepiece = Field(Field(j, "model"), "byte_fallback") == true;
    std::function<void(const json&)> scan = [&](const json& node) {
      if (node.is_array()) {
        for (const json& v : node) scan(v);
      } else if (node.is_object()) {
        const std::string type = TypeOf(node);
        byte_level = byte_level || type == "ByteLevel";
        sentencepiece = sentencepiece || type == "Metaspace" || type == "ByteFallback" ||
                        type == "Prepend" || type == "Replace" || type == "Strip";
        for (const auto& [key, v] : node.items()) scan(v);
      }
    };
    for (const char* key : {"normalizer", "pre_tokenizer", "decoder"}) scan(Field(j, key));
    return sentencepiece && !byte_level;
  }

  // A Replace{pattern: {String: s}, content: c} of a normalizer or decoder.
  absl::Status LoadReplace(const json& r, const std::string& field, NormalizerStep* step) {
    const json& pattern = Field(r, "pattern");
    if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string())
      return Invalid(field + ".pattern", "only {\"String\": ...} patterns are supported");
    const json& content = Field(r, "content");
    if (!content.is_string()) return Invalid(field + ".content", "expected a string");
    step->kind = NormalizerStep::Kind::kReplace;
    step->from = pattern["String"].get<std::string>();
    step->to = content.get<std::string>();
    return absl::OkStatus();
  }

  absl::Status LoadNormalizer(const json& n, const std::string& field) {
    if (n.is_null()) return absl::OkStatus();
    const std::string type = TypeOf(n);
    if (type == "NFC") {
      t_->normalizers_.push_back({NormalizerStep::Kind::kNfc, "", ""});
      return absl::OkStatus();
    }
    if (type == "Sequence") {
      return ForEachIn(n, "normalizers", field, [&](const json& e, const std::string& sub) {
        return LoadNormalizer(e, sub);
      });
    }
    NormalizerStep step;
    if (type == "Prepend") {
      const json& prepend = Field(n, "prepend");
      if (!prepend.is_string()) return Invalid(field + ".prepend", "expected a string");
      step.to = prepend.get<std::string>();
    } else if (type == "Replace") {
      if (auto s = LoadReplace(n, field, &step); !s.ok()) return s;
    } else {
      return Invalid(field + ".type", absl::StrCat("unsupported normalizer '", type,
                                                   "' (NFC, Prepend, Replace, Sequence)"));
    }
    t_->normalizers_.push_back(std::move(step));
    return absl::OkStatus();
  }

  // Records what the decoder does to a token's spelling (decode_steps_,
  // decode_byte_fallback_) and to the text (strip_leading_spaces_).
  absl::Status LoadDecoder(const json& d, const std::string& field) {
    if (d.is_null()) return absl::OkStatus();
    const std::string type = TypeOf(d);
    if (type == "ByteLevel") {
      decode_byte_level_ = true;
      return absl::OkStatus();
    }
    if (type == "Fuse") return absl::OkStatus();
    if (type == "Sequence") {
      return ForEachIn(d, "decoders", field, [&](const json& e, const std::string& sub) {
        return LoadDecoder(e, sub);
      });
    }
    if (type == "ByteFallback") {
      decode_byte_fallback_ = true;
      return absl::OkStatus();
    }
    if (type == "Replace") {
      NormalizerStep step;
      if (auto s = LoadReplace(d, field, &step); !s.ok()) return s;
      decode_steps_.push_back(std::move(step));
      return absl::OkStatus();
    }
    if (type == "Metaspace") {
      absl::StatusOr<MetaspaceSpec> spec = LoadMetaspace(d, field);
      if (!spec.ok()) return spec.status();
      decode_steps_.push_back({NormalizerStep::Kind::kReplace, spec->replacement, " "});
      t_->drop_first_token_spaces_ = spec->prepend != MetaspaceSpec::Prepend::kNever;
      return absl::OkStatus();
    }
    if (type == "Strip") {
      if (d.value("content", std::string()) != " " || d.value("stop", 0) != 0 ||
          !d.value("start", json()).is_number_unsigned())
        return Invalid(field, "only Strip of leading spaces (content \" \", stop 0) is supported");
      t_->strip_leading_spaces_ = d["start"].get<int32_t>();
      return absl::OkStatus();
    }
    return Invalid(field + ".type",
                   absl::StrCat("unsupported decoder '", type,
                                "' (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip)"));
  }

  // Metaspace{replacement, prepend_scheme (or the older add_prefix_space), split}.
  absl::StatusOr<MetaspaceSpec> LoadMetaspace(const json& m, const std::string& field) {
    MetaspaceSpec spec;
    if (m.contains("replacement")) {
      if (!m["replacement"].is_string() || m["replacement"].get<std::string>().empty())
        return Invalid(field + ".replacement", "expected a non-empty string");
      spec.replacement = m["replacement"].get<std::string>();
    }
    if (m.contains("prepend_scheme")) {
      const std::string scheme = m["prepend_scheme"].is_string()
                                     ? m["prepend_scheme"].get<std::string>()
                                     : std::string();
      if (scheme == "always") {
        spec.prepend = MetaspaceSpec::Prepend::kAlways;
      } else if (scheme == "first") {
        spec.prepend = MetaspaceSpec::Prepend::kFirst;
      } else if (scheme == "never") {
        spec.prepend = MetaspaceSpec::Prepend::kNever;
      } else {
        return Invalid(field + ".prepend_scheme", "expected always, first or never");
      }
    } else if (m.value("add_prefix_space", true) == false) {
      spec.prepend = MetaspaceSpec::Prepend::kNever;
    }
    spec.split = m.value("split", true);
    return spec;
  }

  absl::Status LoadPreTokenizer(const json& p, const std::string& field) {
    if (p.is_null()) return absl::OkStatus();
    const std::string type = TypeOf(p);
    if (type == "Sequence") {
      return ForEachIn(p, "pretokenizers", field, [&](const json& e, const std::string& sub) {
        return LoadPreTokenizer(e, sub);
      });
    }
    if (type == "Metaspace") {
      // It works on spaces, which no other step leaves: it must come first.
      if (t_->metaspace_.has_value() || !t_->pre_tokenizers_.empty())
        return Invalid(field, "Metaspace is supported only as the first pre-tokenizer");
      absl::StatusOr<MetaspaceSpec> spec = LoadMetaspace(p, field);
      if (!spec.ok()) return spec.status();
      t_->metaspace_ = *std::move(spec);
      return absl::OkStatus();
    }
    if (type == "ByteLevel") {
      Add(PreTokenizerStep::ByteLevel(p.value("add_prefix_space", false),
                                      p.value("use_regex", true)));
      return absl::OkStatus();
    }
    if (type == "Digits") {
      Add(PreTokenizerStep::Digits(p.value("individual_digits", false)));
      return absl::OkStatus();
    }
    if (type != "Split") {
      return Invalid(field + ".type",
                     absl::StrCat("unsupported pre-tokenizer '", type,
                                  "' (Metaspace, ByteLevel, Split, Digits, Sequence)"));
    }
    const json& pattern = Field(p, "pattern");
    const bool is_regex = pattern.contains("Regex"), is_string = pattern.contains("String");
    if (!is_regex && !is_string)
      return Invalid(field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    const json& source = is_regex ? pattern["Regex"] : pattern["String"];
    if (!source.is_string()) return Invalid(field + ".pattern", "expected a string");
    static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
        {"Removed", SplitBehavior::kRemoved},
        {"Isolated", SplitBehavior::kIsolated},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    const std::string behavior = p.value("behavior", std::string());
    const auto* found = std::find_if(std::begin(kBehaviors), std::end(kBehaviors),
                                     [&](const auto& b) { return behavior == b.first; });
    if (found == std::end(kBehaviors))
      return Invalid(field + ".behavior", absl::StrCat("unsupported behavior '", behavior, "'"));
    auto step = PreTokenizerStep::Split(source.get<std::string>(), /*literal=*/is_string,
                                        found->second, p.value("invert", false));
    if (!step.ok()) return Invalid(field + ".pattern", std::string(step.status().message()));
    Add(*std::move(step));
    return absl::OkStatus();
  }

  void Add(PreTokenizerStep step) {
    if (!step.is_identity()) t_->pre_tokenizers_.push_back(std::move(step));
  }

  absl::Status LoadModel(const json& m) {
    if (!m.is_object()) return Invalid("model", "expected an object");
    const std::string type = TypeOf(m);
    if (!type.empty() && type != "BPE")
      return Invalid("model.type", absl::StrCat("unsupported model type '", type, "' (only BPE)"));
    t_->byte_fallback_ = m.value("byte_fallback", false);
    for (const char* field : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const json& v = m.value(field, json());
      if (!v.is_null() && !(v.is_string() && v.get<std::string>().empty()))
        return Invalid(absl::StrCat("model.", field), "not supported");
    }
    t_->ignore_merges_ = m.value("ignore_merges", false);
    t_->fuse_unk_ = m.value("fuse_unk", false);

    const json& vocab = Field(m, "vocab");
    if (!vocab.is_object()) return Invalid("model.vocab", "expected an object");
    t_->tokens_.reserve(vocab.size());
    t_->bytes_to_id_.reserve(vocab.size());
    for (const auto& [spelled, id] : vocab.items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxTokenId)
        return Invalid("model.vocab", absl::StrCat("bad id for token '", spelled, "'"));
      const auto tid = static_cast<TokenId>(id.get<int64_t>());
      Grow(tid);
      std::string bytes;
      if (t_->utf8_vocab_) {
        // Looked up by its spelling; decoded as the decoder would.
        const int byte = ByteFallbackValue(spelled);
        if (byte >= 0) t_->fallback_id_[byte] = tid;
        t_->bytes_to_id_[spelled] = tid;
        DecodeUtf8Spelling(spelled, &t_->tokens_[tid]);
      } else if (ByteLevelDecode(spelled, &bytes)) {
        t_->bytes_to_id_[bytes] = tid;
        t_->tokens_[tid].bytes = std::move(bytes);
      } else {  // not byte-level spelled: its bytes are its UTF-8
        t_->odd_vocab_[spelled] = tid;
        t_->tokens_[tid].bytes = spelled;
      }
    }
    for (int b = 0; b < 256; ++b) {
      auto it = t_->bytes_to_id_.find(std::string(1, static_cast<char>(b)));
      t_->byte_id_[b] = it == t_->bytes_to_id_.end() ? -1 : it->second;
    }

    const json& merges = Field(m, "merges");
    if (!merges.is_array() && !merges.is_null())
      return Invalid("model.merges", "expected an array");
    t_->merges_.reserve(merges.size());  // (0 for null)
    for (size_t i = 0; i < merges.size(); ++i) {
      const json& e = merges[i];
      std::string a, b;
      if (e.is_string()) {  // "a b"
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return Invalid(absl::StrCat("model.merges[", i, "]"), "expected \"left right\"");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        return Invalid(absl::StrCat("model.merges[", i, "]"), "expected \"a b\" or [\"a\", \"b\"]");
      }
      std::optional<TokenId> ia, ib, im;
      std::string ba, bb;
      if (t_->utf8_vocab_) {
        ia = Lookup(t_->bytes_to_id_, a);
        ib = Lookup(t_->bytes_to_id_, b);
        im = Lookup(t_->bytes_to_id_, a + b);
      } else if (ByteLevelDecode(a, &ba) && ByteLevelDecode(b, &bb)) {  // no re-decode
        ia = Lookup(t_->bytes_to_id_, ba);
        ib = Lookup(t_->bytes_to_id_, bb);
        ba += bb;
        im = Lookup(t_->bytes_to_id_, ba);
      } else {
        ia = t_->FindToken(a);
        ib = t_->FindToken(b);
        im = t_->FindToken(a + b);
      }
      if (!ia || !ib || !im) {
        return Invalid(absl::StrCat("model.merges[", i, "]"), absl::StrCat("token '",
                                                                           !ia   ? a
                                                                           : !ib ? b
                                                                                 : a + b,
                                                                           "' not in vocab"));
      }
      // As in tokenizers, a repeated pair keeps its last rank.
      t_->merges_.insert_or_assign(PairKey(*ia, *ib), Merge{static_cast<int32_t>(i), *im});
    }

    const json& unk = Field(m, "unk_token");
    if (unk.is_string()) t_->unk_id_ = t_->FindToken(unk.get<std::string>());
    return absl::OkStatus();
  }

  absl::Status LoadAddedTokens(const json& list) {
    if (list.is_null()) return absl::OkStatus();
    if (!list.is_array()) return Invalid("added_tokens", "expected an array");
    absl::flat_hash_set<std::string> special_contents;
    std::vector<std::pair<TokenId, std::string>> decoded_as;  // each token's decoded spelling
    for (size_t i = 0; i < list.size(); ++i) {
      const json& a = list[i];
      const std::string field = absl::StrCat("added_tokens[", i, "]");
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string())
        return Invalid(field, "expected {\"id\": int, \"content\": string, ...}");
      const int64_t id = a["id"].get<int64_t>();
      std::string content = a["content"].get<std::string>();
      if (id < 0 || id >= kMaxTokenId) return Invalid(field + ".id", "out of range");
      if (content.empty() || !IsValidUtf8(content))
        return Invalid(field + ".content", "empty or not UTF-8");
      const auto tid = static_cast<TokenId>(id);
      Grow(tid);
      // A "normalized" token is matched, and decoded, as the normalizer spells it.
      const bool normalized = a.value("normalized", false);
      std::string pattern =
          normalized && !t_->normalizers_.empty() ? Normalize(content, t_->normalizers_) : content;
      DecodeAddedToken(pattern, &t_->tokens_[tid]);
      if (a.value("special", false)) special_contents.insert(content);
      decoded_as.emplace_back(tid, pattern);
      t_->added_by_content_.try_emplace(content, tid);
      if (pattern.empty()) continue;  // a normalizer erased it: nothing to match
      AddedTokenSet& set = normalized ? t_->normalized_added_ : t_->raw_added_;
      set.tokens.push_back({std::move(content), std::move(pattern), tid,
                            a.value("single_word", false), a.value("lstrip", false),
                            a.value("rstrip", false)});
    }
    // skip_special_tokens drops a token when the spelling it decodes from is a
    // special token's content, as tokenizers (0.23) tests it: a special token
    // the normalizer changes (Llama 2's Prepend makes "<N>" "▁<N>") stays in.
    for (const auto& [tid, spelling] : decoded_as) {
      t_->tokens_[tid].special = special_contents.contains(spelling);
    }
    for (AddedTokenSet* set : {&t_->raw_added_, &t_->normalized_added_}) {
      std::stable_sort(set->tokens.begin(), set->tokens.end(),
                       [](const AddedToken& x, const AddedToken& y) {
                         return x.pattern.size() > y.pattern.size();
                       });
      for (size_t k = 0; k < set->tokens.size(); ++k) {
        const auto first = static_cast<uint8_t>(set->tokens[k].pattern[0]);
        set->by_first_byte[first].push_back(static_cast<int32_t>(k));
      }
    }
    for (std::string_view name : {"<|begin_of_text|>", "<s>", "<|startoftext|>", "<|endoftext|>"}) {
      if (std::optional<TokenId> id = t_->FindToken(name)) {
        t_->bos_id_ = id;
        break;
      }
    }
    return absl::OkStatus();
  }

  static std::optional<TokenId> Lookup(const absl::flat_hash_map<std::string, TokenId>& map,
                                       const std::string& key) {
    auto it = map.find(key);
    return it == map.end() ? std::nullopt : std::optional<TokenId>(it->second);
  }

  // A vocab token spelled in UTF-8 ("▁the", "<0x0A>") as the decoder reads it.
  void DecodeUtf8Spelling(const std::string& spelled, TokenInfo* token) const {
    const int byte = ByteFallbackValue(spelled);
    token->byte_fallback = byte >= 0 && decode_byte_fallback_;
    token->bytes = token->byte_fallback ? std::string(1, static_cast<char>(byte))
                                        : Normalize(spelled, decode_steps_);
  }

  // An added token's text as the decoder reads it (tokenizers decodes added
  // tokens with the model's tokens): like a vocab token when SentencePiece
  // style; byte-level decoded by a ByteLevel decoder when every character is
  // in the byte map (as its decoder does), else as it is.
  void DecodeAddedToken(const std::string& text, TokenInfo* token) const {
    if (t_->utf8_vocab_) {
      DecodeUtf8Spelling(text, token);
      return;
    }
    token->byte_fallback = false;
    std::string bytes;
    token->bytes = decode_byte_level_ && ByteLevelDecode(text, &bytes) ? std::move(bytes) : text;
  }

  void Grow(TokenId id) {
    if (static_cast<size_t>(id) >= t_->tokens_.size()) t_->tokens_.resize(id + 1);
  }

  const std::string& path_;
  Tokenizer* t_;
  std::vector<NormalizerStep> decode_steps_;  // the decoder's replacements of a spelling
  bool decode_byte_fallback_ = false;         // the decoder turns "<0xAB>" into its byte
  bool decode_byte_level_ = false;            // the decoder maps GPT-2's byte map back
};

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return absl::NotFoundError(absl::StrCat("tokenizer file not found: ", path));
  if (std::filesystem::is_directory(path, ec))
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not tokenizer.json"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::PermissionDeniedError(absl::StrCat("cannot open ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  try {
    const json j = json::parse(buffer.str());
    Loader loader(path, t.get());
    if (absl::Status s = loader.Load(j); !s.ok()) return s;
  } catch (const json::exception& e) {  // parse errors and wrongly typed fields
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid tokenizer JSON: ", e.what()));
  }
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromDirectory(
    const std::string& model_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model directory not found: ", model_dir));
  }
  return LoadFromFile(model_dir + "/tokenizer.json");
}

}  // namespace folio
