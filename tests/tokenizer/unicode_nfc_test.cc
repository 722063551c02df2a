// NfcNormalize against Python's unicodedata.normalize("NFC"): the cases in
// tests/tokenizer/testdata/nfc_cases.json (written with the tables by
// tools/make_unicode_nfc_tables.py, so both follow one Unicode version).
#include "common/unicode_nfc.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using nlohmann::json;

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string ToHex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

json LoadCases() {
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/tests/tokenizer/testdata/nfc_cases.json");
  return json::parse(in);
}

TEST(UnicodeNfcTest, MatchesPythonUnicodedata) {
  const json doc = LoadCases();
  EXPECT_EQ(doc.at("unicode").get<std::string>(), std::string(NfcUnicodeVersion()));
  int checked = 0, changed = 0;
  for (const json& c : doc.at("cases")) {
    const std::string in = FromHex(c.at("in").get<std::string>());
    const std::string want = FromHex(c.at("nfc").get<std::string>());
    EXPECT_EQ(ToHex(NfcNormalize(in)), ToHex(want)) << c.at("name").get<std::string>();
    // NFC is idempotent.
    EXPECT_EQ(ToHex(NfcNormalize(want)), ToHex(want)) << c.at("name").get<std::string>();
    ++checked;
    changed += in != want;
  }
  EXPECT_GE(checked, 500);
  EXPECT_GE(changed, 300);
}

TEST(UnicodeNfcTest, ReadableExamples) {
  EXPECT_EQ(NfcNormalize("cafe\xCC\x81"), "caf\xC3\xA9");                           // e + U+0301
  EXPECT_EQ(NfcNormalize("\xE2\x84\xAB"), "\xC3\x85");                              // Angstrom sign
  EXPECT_EQ(NfcNormalize("\xE2\x84\xAA"), "K");                                     // Kelvin sign
  EXPECT_EQ(NfcNormalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  // Dot below (220) sorts before circumflex (230), then both compose: ậ.
  EXPECT_EQ(NfcNormalize("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");
  // U+0958 is a composition exclusion: it decomposes and stays so.
  EXPECT_EQ(NfcNormalize("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");
  EXPECT_EQ(NfcNormalize("\xF0\x9F\x98\x80 ok"), "\xF0\x9F\x98\x80 ok");  // emoji untouched
  // The tables are Unicode 9.0's, as tokenizers has them: U+07FD (11.0) is a
  // plain starter there, so the acute after it does not reach the a.
  EXPECT_EQ(NfcUnicodeVersion(), "9.0");
  EXPECT_EQ(NfcNormalize("a\xDF\xBD\xCC\x81"), "a\xDF\xBD\xCC\x81");
}

TEST(UnicodeNfcTest, InvalidBytesPassThroughAndSeparate) {
  EXPECT_EQ(NfcNormalize("\xFF"), "\xFF");
  EXPECT_EQ(NfcNormalize("e\xFF\xCC\x81"), "e\xFF\xCC\x81");  // no composing across 0xFF
  EXPECT_EQ(NfcNormalize("\xC3"), "\xC3");
  EXPECT_EQ(NfcNormalize("\xED\xA0\x80"
                         "A\xCC\x8A"),
            "\xED\xA0\x80\xC3\x85");  // surrogate bytes
}

TEST(UnicodeNfcTest, LongInputsStayLinear) {
  // 200k combining marks after one base (the audit's slow case had 50k).
  std::string marks = "a";
  for (int i = 0; i < 200000; ++i) marks += "\xCC\x81";
  const std::string nfc = NfcNormalize(marks);
  EXPECT_EQ(nfc.size(), marks.size() - 1);  // á (2 bytes) replaces a + U+0301 (3) ...
  EXPECT_EQ(nfc.substr(0, 2), "\xC3\xA1");  // ... and the rest stay
  // Alternating classes 220 / 230 are sorted, not quadratically.
  std::string mixed = "a";
  for (int i = 0; i < 100000; ++i) mixed += "\xCC\x81\xCC\xA3";  // U+0301 (230), U+0323 (220)
  const std::string sorted = NfcNormalize(mixed);
  EXPECT_EQ(sorted.substr(0, 3), "\xE1\xBA\xA1");  // ạ: a + dot below, then the acutes
  const std::string ascii(1 << 20, 'x');
  EXPECT_EQ(NfcNormalize(ascii), ascii);
}

}  // namespace
}  // namespace folio
