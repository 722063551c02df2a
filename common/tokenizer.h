#ifndef FOLIO_COMMON_TOKENIZER_H_
#define FOLIO_COMMON_TOKENIZER_H_

// A Hugging Face tokenizer.json reader for BPE: byte-level (GPT-2, Llama-3,
// Qwen2 and the folio demo model) and SentencePiece-style (Llama 2,
// TinyLlama, Mistral: "▁" for spaces, byte-fallback tokens).
//
// Encoding, as the `tokenizers` library does it:
//   1. added tokens (special or not) map to their ids where they occur
//      (leftmost, longest first; lstrip/rstrip absorb ASCII whitespace;
//      single_word treats ASCII alphanumerics, '_' and non-ASCII as word
//      chars): first those marked "normalized": false, found in the raw text;
//      then each stretch between them is normalized (none, NFC, or Prepend /
//      Replace steps, in a Sequence) and those marked "normalized": true are
//      found in it, spelled as the normalizer spells their content;
//   2. each stretch left is split by the pre-tokenizers: Metaspace (first, if
//      present; "first" prepends only to the stretch that starts the text),
//      ByteLevel (use_regex: the GPT-2 regex), Split with a Regex or String
//      pattern (PCRE2 with UTF and UCP, JIT when available) and any
//      behavior/invert, Digits, or a Sequence;
//   3. each pre-token is BPE-merged by rank over its bytes (byte-level: the
//      byte map only changes how tokens are spelled in the file) or over its
//      UTF-8 characters (SentencePiece style; a character the vocab lacks
//      becomes its byte-fallback tokens "<0xAB>", else unk), or, with
//      `ignore_merges` (Llama-3), taken whole when the vocab holds it.
// Decoding concatenates token bytes and replaces invalid UTF-8 like Rust's
// from_utf8_lossy (one U+FFFD per maximal invalid subpart). SentencePiece
// style, as the decoders do it: "▁" reads as a space (a Metaspace decoder
// drops those of the first token), a run of byte-fallback tokens as its bytes
// (one U+FFFD per token when the run is not valid UTF-8), and a Strip decoder
// drops leading spaces of the text. Added tokens go through the same
// decoder (their normalized content, for "normalized": true ones), as
// `tokenizers` does: "▁" in a SentencePiece-style added token reads as a
// space, a byte-level one is byte-decoded when all its characters are in
// GPT-2's byte map. Streaming (IncrementalDetokenizer) takes each token's
// bytes as they come: no stripping, output in context.
//
// Not supported (INVALID_ARGUMENT at load, naming the field and file): models
// other than BPE, subword prefixes/suffixes, normalizers other than those
// above, decoders other than ByteLevel / Metaspace / Replace / ByteFallback /
// Fuse / Strip (of leading spaces), other pre-tokenizers (NFD, NFKC and NFKD
// too). NFC (Qwen2, Qwen3) is common/unicode_nfc.h, with the tables of the
// Unicode version it names.
// The post_processor's TemplateProcessing (alone or in a Sequence) gives the
// special tokens put around a prompt (EncodePrompt: Llama's BOS); ByteLevel
// and null add none (GPT-2, Qwen2); others are ignored.
//
// Thread-safety: immutable after loading (except set_bos_token_id, which must
// happen before the tokenizer is shared); all const methods may run
// concurrently.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/byte_level.h"
#include "common/metaspace.h"
#include "common/types.h"

namespace folio {

class Tokenizer {
 public:
  // Reads a tokenizer.json. NOT_FOUND if the file is missing; INVALID_ARGUMENT
  // for bad JSON, a malformed or unsupported field. Every message names the file.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromFile(const std::string& path);
  // model_dir/tokenizer.json.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromDirectory(const std::string& model_dir);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // Token ids of `text`, preceded by bos_token_id() when add_bos is set and a
  // BOS id is known. Invalid UTF-8 in `text` is first replaced by U+FFFD.
  std::vector<TokenId> Encode(std::string_view text, bool add_bos = false) const;

  // A prompt's ids as Hugging Face's tokenizer gives them: Encode(text) with
  // the post-processor's special tokens around it when add_special_tokens
  // (the BOS of Llama 2/3 and Mistral; none for GPT-2 or Qwen2).
  std::vector<TokenId> EncodePrompt(std::string_view text, bool add_special_tokens = true) const;

  // Text of `ids`: token bytes concatenated, invalid UTF-8 replaced by U+FFFD.
  // Ids outside the vocabulary are skipped; special tokens (IsSpecial) are
  // skipped when skip_special_tokens is set.
  std::string Decode(std::span<const TokenId> ids, bool skip_special_tokens = true) const;

  // The pre-tokens (raw bytes) of a text without added tokens: the
  // normalization and step 2 of the encoding above. For tests and debugging.
  std::vector<std::string> PreTokenize(std::string_view text) const;

  // max id + 1 over the vocab and the added tokens.
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }

  // The first of <|begin_of_text|>, <s>, <|startoftext|>, <|endoftext|> that
  // the added tokens (or else the vocab) hold; nullopt if none.
  std::optional<TokenId> bos_token_id() const { return bos_id_; }
  // Overrides the BOS id (for example with config.json's bos_token_id).
  // REQUIRES: not concurrent with any other call.
  void set_bos_token_id(std::optional<TokenId> id) { bos_id_ = id; }

  // The id of a token spelled as in tokenizer.json: an added token's content
  // ("<|end_of_text|>") or a vocab entry in byte-level form ("Ġthe"). (Named
  // FindToken because a member named TokenId would hide the type.)
  std::optional<TokenId> FindToken(std::string_view token) const;

  // True for the tokens skip_special_tokens leaves out: added tokens whose
  // decoded spelling (the content, normalized for "normalized": true ones) is
  // the content of one marked "special": true, as tokenizers (0.23) decides.
  // So a special "normalized" token that the normalizer changes is not
  // (Llama 2's Prepend spells "<N>" as "▁<N>": it decodes as " <N>").
  bool IsSpecial(TokenId id) const { return id >= 0 && id < vocab_size() && tokens_[id].special; }
  // True for a SentencePiece byte-fallback token ("<0xAB>") that decodes as
  // its byte: a run of them decodes as a whole (see Decode).
  bool IsByteFallback(TokenId id) const {
    return id >= 0 && id < vocab_size() && tokens_[id].byte_fallback;
  }

  // Raw bytes of one token as the decoder spells it (a vocab token
  // byte-level decoded or with "▁" as a space, an added token likewise);
  // empty for ids outside the vocabulary.
  std::string TokenBytes(TokenId id) const { return std::string(TokenBytesView(id)); }
  std::string_view TokenBytesView(TokenId id) const {
    return id >= 0 && id < vocab_size() ? std::string_view(tokens_[id].bytes) : std::string_view();
  }

 private:
  struct TokenInfo {
    std::string bytes;  // empty for ids that are neither vocab nor added tokens
    bool special = false;        // IsSpecial
    bool byte_fallback = false;  // "<0xAB>", decoded as its byte
  };
  struct AddedToken {
    std::string content;  // as in tokenizer.json
    std::string pattern;  // what is matched: content, normalized if "normalized"
    TokenId id;
    bool single_word, lstrip, rstrip;
  };
  // Added tokens matched in one pass, longest pattern first.
  struct AddedTokenSet {
    std::vector<AddedToken> tokens;
    std::array<std::vector<int32_t>, 256> by_first_byte;  // indices into tokens
  };
  struct Merge {
    int32_t rank;
    TokenId id;
  };
  class Loader;

  Tokenizer();

  static uint64_t PairKey(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Finds the added token of `set` to split out at text[pos]; returns its
  // index or -1.
  static int MatchAddedToken(const AddedTokenSet& set, std::string_view text, size_t pos);
  // Appends to *ids the ids of the added tokens of `set` found in `text`, and
  // calls encode_stretch(stretch, offset in text) for the text before, between
  // and after them.
  template <class EncodeStretch>
  static void SplitAtAddedTokens(const AddedTokenSet& set, std::string_view text,
                                 std::vector<TokenId>* ids, EncodeStretch encode_stretch);
  // Normalizes, splits out the normalized added tokens and encodes the rest
  // of a stretch between non-normalized ones (first: it starts the input).
  void EncodeOrdinary(std::string_view text, bool first, std::vector<TokenId>* out) const;
  // Pre-tokenizes and BPE-encodes normalized text without added tokens.
  void EncodeNormalized(std::string_view text, bool first, std::vector<TokenId>* out) const;
  void PreTokenizeInto(std::string_view text, bool first, std::vector<std::string>* pieces) const;
  // BPE of one pre-token (raw bytes).
  void EncodePiece(std::string_view piece, std::vector<TokenId>* out) const;
  // The first symbols of a pre-token spelled in UTF-8: a vocab id per
  // character, byte-fallback ids or unk for the others.
  void AppendCharSymbols(std::string_view piece, std::vector<TokenId>* ids) const;

  // All const after loading.
  std::vector<TokenInfo> tokens_;                              // by id
  absl::flat_hash_map<std::string, TokenId> bytes_to_id_;      // vocab by raw bytes
  absl::flat_hash_map<std::string, TokenId> odd_vocab_;        // vocab not byte-level spelled
  absl::flat_hash_map<uint64_t, Merge> merges_;                // (left, right) -> merge
  std::array<TokenId, 256> byte_id_;                           // single bytes; -1 if absent
  AddedTokenSet raw_added_;                                    // "normalized": false
  AddedTokenSet normalized_added_;                             // "normalized": true
  absl::flat_hash_map<std::string, TokenId> added_by_content_;  // both, by content
  std::vector<PreTokenizerStep> pre_tokenizers_;               // applied in order
  // SentencePiece style: the vocab is spelled in UTF-8 (bytes_to_id_ keys
  // are those spellings), merged by character.
  bool utf8_vocab_ = false;
  std::vector<NormalizerStep> normalizers_;                    // applied in order
  std::optional<MetaspaceSpec> metaspace_;                     // before pre_tokenizers_
  bool byte_fallback_ = false;
  std::array<TokenId, 256> fallback_id_;                       // "<0xAB>" tokens; -1 if absent
  int32_t strip_leading_spaces_ = 0;                           // Strip decoder: of the text
  bool drop_first_token_spaces_ = false;                       // Metaspace decoder
  bool ignore_merges_ = false;
  std::optional<TokenId> unk_id_;
  bool fuse_unk_ = false;
  std::optional<TokenId> bos_id_;
  std::vector<TokenId> prompt_prefix_;  // the post-processor's special tokens before the text
  std::vector<TokenId> prompt_suffix_;  // and after it
};

}  // namespace folio

#endif  // FOLIO_COMMON_TOKENIZER_H_
