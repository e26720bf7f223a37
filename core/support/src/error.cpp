#include "optiflow/support/error.hpp"

#include <algorithm>

namespace optiflow::support {
namespace {

bool is_utf8_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// [begin, end) of `line` to show for an error at byte `at`: all of it when it fits, else
// kExcerptWidth bytes centred on `at` where possible, never splitting a UTF-8 sequence.
std::pair<std::size_t, std::size_t> excerpt_window(std::string_view line, std::size_t at) {
  if (line.size() <= kExcerptWidth) return {0, line.size()};
  std::size_t begin =
      std::min(at > kExcerptWidth / 2 ? at - kExcerptWidth / 2 : 0, line.size() - kExcerptWidth);
  std::size_t end = begin + kExcerptWidth;
  while (begin > 0 && begin < line.size() && is_utf8_continuation(line[begin])) ++begin;
  while (end < line.size() && is_utf8_continuation(line[end])) --end;
  return {begin, end};
}

}  // namespace

std::string format_diagnostic(const SourceLocation& where, const std::string& message) {
  std::string out = where.file.empty() ? std::string("<input>") : where.file;
  if (where.line > 0) {
    out += ':' + std::to_string(where.line);
    if (where.column > 0) out += ':' + std::to_string(where.column);
  }
  out += ": error: ";
  if (!where.field.empty()) out += where.field + ": ";
  out += message;
  return out;
}

std::string format_source_excerpt(std::string_view line, int column) {
  // The caret may stand just past the last character (an error at the end of the line).
  const std::size_t at =
      std::min(column > 0 ? static_cast<std::size_t>(column - 1) : 0, line.size());
  const auto [begin, end] = excerpt_window(line, at);
  const std::string_view shown = line.substr(begin, end - begin);
  const std::string cut_before = begin > 0 ? "..." : "";
  std::string out = "  " + cut_before + std::string(shown) + (end < line.size() ? "..." : "");
  out += "\n  " + std::string(cut_before.size(), ' ');
  for (std::size_t i = begin; i < at; ++i) out += line[i] == '\t' ? '\t' : ' ';
  return out + "^";
}

}  // namespace optiflow::support
