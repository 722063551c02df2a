#include "common/flags.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

using ::testing::HasSubstr;

// Parses `args` (after a program name) into a fresh set of flags.
struct Parsed {
  std::string name = "default";
  int64_t count = 7;
  double ratio = 0.5;
  bool on = true;
  std::vector<std::string> many;
  FlagSet flags;
  absl::Status status;

  explicit Parsed(std::vector<std::string> args) {
    flags.String("name", &name, "a string");
    flags.Int("count", &count, "an int");
    flags.Double("ratio", &ratio, "a double");
    flags.Bool("on", &on, "a bool");
    flags.Strings("many", &many, "repeatable");
    args.insert(args.begin(), "prog");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    status = flags.Parse(static_cast<int>(argv.size()), argv.data());
  }
};

TEST(FlagSetTest, ParsesEveryFormAndTellsWhichWereSet) {
  Parsed p({"--name", "x", "--count=3", "pos", "--no-on", "--many", "a", "--many=b"});
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.name, "x");
  EXPECT_EQ(p.count, 3);
  EXPECT_FALSE(p.on);
  EXPECT_EQ(p.many, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.flags.positional(), std::vector<std::string>{"pos"});
  EXPECT_TRUE(p.flags.IsSet("name"));
  EXPECT_TRUE(p.flags.IsSet("count"));
  EXPECT_TRUE(p.flags.IsSet("on"));  // --no-on sets it, to false
  EXPECT_TRUE(p.flags.IsSet("many"));
  EXPECT_FALSE(p.flags.IsSet("ratio"));  // left at its default
  EXPECT_EQ(p.ratio, 0.5);
  EXPECT_FALSE(p.flags.IsSet("unknown"));
}

TEST(FlagSetTest, TheEnvironmentSetsAFlagAndTheCommandLineWins) {
  ::setenv("FOLIO_RATIO", "0.25", 1);
  ::setenv("FOLIO_COUNT", "9", 1);
  Parsed p({"--count", "4"});
  ::unsetenv("FOLIO_RATIO");
  ::unsetenv("FOLIO_COUNT");
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.ratio, 0.25);
  EXPECT_TRUE(p.flags.IsSet("ratio"));
  EXPECT_EQ(p.count, 4);
  EXPECT_FALSE(p.flags.IsSet("name"));
}

TEST(FlagSetTest, BadInputNamesTheFlag) {
  EXPECT_THAT(std::string(Parsed({"--bogus"}).status.message()), HasSubstr("--bogus"));
  EXPECT_THAT(std::string(Parsed({"--count", "many"}).status.message()), HasSubstr("count"));
  EXPECT_THAT(std::string(Parsed({"--name"}).status.message()), HasSubstr("--name needs a value"));
  ::setenv("FOLIO_COUNT", "x", 1);
  const absl::Status env = Parsed({}).status;
  ::unsetenv("FOLIO_COUNT");
  EXPECT_THAT(std::string(env.message()), HasSubstr("FOLIO_COUNT"));
}

}  // namespace
}  // namespace folio
