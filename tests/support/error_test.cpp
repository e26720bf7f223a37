#include "optiflow/support/error.hpp"

#include <gtest/gtest.h>

#include <string>

namespace optiflow::support {
namespace {

// The character above the caret of an excerpt (its two lines, as rendered).
char char_above_caret(const std::string& excerpt) {
  const auto newline = excerpt.find('\n');
  const std::string text = excerpt.substr(0, newline), caret = excerpt.substr(newline + 1);
  EXPECT_EQ(caret.back(), '^');
  return text.at(caret.size() - 1);
}

TEST(SourceExcerpt, ShortLinesAreShownWhole) {
  EXPECT_EQ(format_source_excerpt("ring ovr all", 6), "  ring ovr all\n       ^");
  EXPECT_EQ(format_source_excerpt("\tring ovr", 7), "  \tring ovr\n  \t     ^");
  EXPECT_EQ(format_source_excerpt("ring", 5), "  ring\n      ^");  // just past the end
}

TEST(SourceExcerpt, LongLinesAreCutAroundTheColumn) {
  std::string line(200 * 1024, 'a');
  const std::size_t at = 100 * 1024;
  line[at] = 'X';
  const std::string excerpt = format_source_excerpt(line, static_cast<int>(at) + 1);
  const std::string text = excerpt.substr(0, excerpt.find('\n'));
  EXPECT_LE(text.size(), 2 + kExcerptWidth + 6);
  EXPECT_TRUE(text.starts_with("  ...")) << text;
  EXPECT_TRUE(text.ends_with("a...")) << text;
  EXPECT_EQ(char_above_caret(excerpt), 'X');
}

TEST(SourceExcerpt, CutsOnlyTheSideThatIsLong) {
  std::string line(1000, 'a');
  line[3] = 'B';
  line[990] = 'E';
  const std::string head = format_source_excerpt(line, 4);
  EXPECT_TRUE(head.starts_with("  aaaB")) << head;
  EXPECT_TRUE(head.substr(0, head.find('\n')).ends_with("...")) << head;
  EXPECT_EQ(char_above_caret(head), 'B');

  const std::string tail = format_source_excerpt(line, 991);
  EXPECT_TRUE(tail.starts_with("  ...")) << tail;
  EXPECT_TRUE(tail.substr(0, tail.find('\n')).ends_with("Eaaaaaaaaa")) << tail;
  EXPECT_EQ(char_above_caret(tail), 'E');
}

TEST(SourceExcerpt, NeverSplitsAUtf8Sequence) {
  std::string line;
  while (line.size() < 1000) line += "\xC3\xA9";  // é, two bytes
  line += "X";
  for (int column : {300, 301, 1001}) {
    const std::string excerpt = format_source_excerpt(line, column);
    const std::string text = excerpt.substr(5, excerpt.find('\n') - 5);  // after "  ..."
    EXPECT_NE(static_cast<unsigned char>(text.front()) & 0xC0, 0x80) << column;
    if (text.ends_with("...")) {
      EXPECT_EQ(text[text.size() - 4], '\xA9') << column;
    }
  }
}

}  // namespace
}  // namespace optiflow::support
