#include "optiflow/llm/reply_parser.hpp"

#include <algorithm>
#include <array>
#include <sstream>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::llm {
namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

bool is_fence(std::string_view line) {
  const std::string_view t = trim(line);
  return t.starts_with("```") || t.starts_with("~~~");
}

// Blocks in another language are examples or output, not candidates.
bool foreign_language(std::string_view tag) {
  static constexpr std::array<std::string_view, 14> kForeign{
      "python", "py",  "bash", "sh",  "shell", "console", "json",
      "cpp",    "c++", "c",    "xml", "yaml",  "ebnf",    "diff"};
  std::string lower(trim(tag));
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::find(kForeign.begin(), kForeign.end(), lower) != kForeign.end();
}

bool parses(const std::string& text) {
  try {
    dsl::parse_program(text, "reply");
    return true;
  } catch (const support::InputError&) {
    return false;
  }
}

void keep(ExtractedPrograms& out, std::string_view program) {
  const std::string_view trimmed = trim(program);
  if (trimmed.empty() || trimmed.size() > kMaxProgramBytes || out.programs.size() >= kMaxPrograms)
    return;
  const std::string text = std::string(trimmed) + "\n";
  if (std::find(out.programs.begin(), out.programs.end(), text) == out.programs.end())
    out.programs.push_back(text);
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Paragraphs (separated by blank lines) that parse on their own.
void unfenced(ExtractedPrograms& out, std::string_view reply) {
  std::string paragraph;
  auto flush = [&] {
    if (!trim(paragraph).empty() && parses(paragraph)) keep(out, paragraph);
    paragraph.clear();
  };
  for (const std::string& line : lines_of(reply)) {
    if (trim(line).empty()) {
      flush();
    } else {
      paragraph += line + "\n";
    }
  }
  flush();
  if (out.programs.empty() && parses(std::string(reply))) keep(out, reply);
}

}  // namespace

ExtractedPrograms extract_programs(std::string_view reply, std::string_view finish_reason) {
  ExtractedPrograms out;
  const std::vector<std::string> lines = lines_of(reply);
  bool fenced = false, open = false, skip = false;
  std::string block;
  for (const std::string& line : lines) {
    if (!is_fence(line)) {
      if (open) block += line + "\n";
      continue;
    }
    fenced = true;
    if (!open) {
      open = true;
      skip = foreign_language(trim(line).substr(3));
      block.clear();
    } else {
      open = false;
      if (!skip) keep(out, block);
    }
  }
  if (open && !skip) {  // the reply ended inside a block
    const bool cut = finish_reason == "length";
    out.truncated = cut;
    if (!cut || out.programs.empty()) keep(out, block);
  }
  if (!fenced) unfenced(out, reply);
  return out;
}

}  // namespace optiflow::llm
