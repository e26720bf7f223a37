// Programs out of model replies as models write them.
#include "optiflow/llm/reply_parser.hpp"

#include <gtest/gtest.h>

namespace optiflow::llm {
namespace {

using Programs = std::vector<std::string>;

TEST(ReplyParser, TakesEachFencedBlockWithProseAround) {
  const auto found = extract_programs(
      "Two ideas.\n\nFirst, rings per rail:\n```ofl\nsplit nlocal as r {\n  ring over all by "
      "(host, (local - r) % nlocal)\n}\n```\nThen a hierarchical one:\n```\nrd over rails\n"
      "direct over hosts\n```\nGood luck!",
      "stop");
  EXPECT_EQ(found.programs,
            (Programs{"split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n",
                      "rd over rails\ndirect over hosts\n"}));
  EXPECT_FALSE(found.truncated);
}

TEST(ReplyParser, SkipsBlocksInOtherLanguagesAndRepeats) {
  const auto found = extract_programs(
      "```python\nprint('ring over all')\n```\n~~~optiflow\nbruck over all\n~~~\n"
      "```ofl\nbruck over all\n```\n",
      "stop");
  EXPECT_EQ(found.programs, (Programs{"bruck over all\n"}));
}

TEST(ReplyParser, ReadsAReplyWithoutFences) {
  EXPECT_EQ(extract_programs("ring over all\n", "stop").programs, (Programs{"ring over all\n"}));
  // Paragraphs that parse are programs; prose paragraphs are not.
  const auto found = extract_programs(
      "Here is my proposal, it should help.\n\npipeline 4\nring over all\n\nThanks.", "stop");
  EXPECT_EQ(found.programs, (Programs{"pipeline 4\nring over all\n"}));
}

TEST(ReplyParser, FindsNothingInProse) {
  const auto found =
      extract_programs("I would use a ring over all the GPUs, maybe a tree.", "stop");
  EXPECT_TRUE(found.programs.empty());
}

TEST(ReplyParser, DropsABlockCutAtTheTokenLimitUnlessItIsTheOnlyOne) {
  const auto two =
      extract_programs("```ofl\nring over all\n```\n```ofl\nsplit 2 as r {\n  ring", "length");
  EXPECT_EQ(two.programs, (Programs{"ring over all\n"}));
  EXPECT_TRUE(two.truncated);
  const auto one = extract_programs("```ofl\nsplit 2 as r {\n  ring", "length");
  EXPECT_EQ(one.programs, (Programs{"split 2 as r {\n  ring\n"}));
  EXPECT_TRUE(one.truncated);
  // A block whose closing fence is missing in a finished reply is whole.
  const auto unclosed = extract_programs("```ofl\nring over all\n", "stop");
  EXPECT_EQ(unclosed.programs, (Programs{"ring over all\n"}));
  EXPECT_FALSE(unclosed.truncated);
}

TEST(ReplyParser, BoundsWhatAHostileReplyCanMake) {
  std::string many;
  for (int i = 0; i < 40; ++i)
    many += "```\npipeline " + std::to_string(i + 1) + "\nring over all\n```\n";
  EXPECT_EQ(extract_programs(many, "stop").programs.size(), kMaxPrograms);
  const std::string huge = "```\n" + std::string(kMaxProgramBytes + 10, '#') + "\n```\n";
  EXPECT_TRUE(extract_programs(huge, "stop").programs.empty());
  EXPECT_TRUE(extract_programs("", "stop").programs.empty());
  EXPECT_TRUE(extract_programs(std::string("\0\xff```", 5), "").programs.empty());
}

}  // namespace
}  // namespace optiflow::llm
