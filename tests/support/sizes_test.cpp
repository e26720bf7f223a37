#include "optiflow/support/sizes.hpp"

#include <gtest/gtest.h>

#include "optiflow/support/error.hpp"

namespace optiflow::support {
namespace {

TEST(Sizes, SuffixesArePowersOfTwo) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("64m"), 64u << 20);
  EXPECT_EQ(parse_size("1GiB"), 1u << 30);
  EXPECT_EQ(parse_size("2KB"), 2048u);
}

TEST(Sizes, RangesDoubleAndListsMerge) {
  EXPECT_EQ(parse_sizes("1K:8K"), (std::vector<std::uint64_t>{1024, 2048, 4096, 8192}));
  EXPECT_EQ(parse_sizes("1M,1K:2K,1K"), (std::vector<std::uint64_t>{1024, 2048, 1u << 20}));
  EXPECT_EQ(parse_sizes(kDefaultSizes).size(), 21u);
  EXPECT_EQ(parse_sizes("3K:8K"), (std::vector<std::uint64_t>{3072, 6144}));
}

TEST(Sizes, BadInputNamesTheOption) {
  for (const char* bad : {"", "abc", "1X", "0", "2K:1K", "1K,", "99999999999T"}) {
    try {
      parse_sizes(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const OptionError& e) {
      EXPECT_EQ(e.option(), "sizes");  // the option's name, for the CLI to map to its flag
      EXPECT_NE(std::string(e.what()).find("sizes: "), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
    }
  }
}

TEST(Sizes, FormatIsTheShortestExactSpelling) {
  EXPECT_EQ(format_size(1024), "1K");
  EXPECT_EQ(format_size(3u << 20), "3M");
  EXPECT_EQ(format_size(1u << 30), "1G");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(1536), "1536");
}

}  // namespace
}  // namespace optiflow::support
