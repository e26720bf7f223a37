// Programs out of a model's reply, however it is written: fenced blocks with or without a
// language tag, prose around them, several candidates, no fences at all, or a reply cut off
// at the token limit.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace optiflow::llm {

struct ExtractedPrograms {
  std::vector<std::string> programs;  ///< in reply order, without repeats
  /// The reply ended inside a block because it hit the token limit; that block was dropped
  /// unless it was the only one.
  bool truncated = false;
};

/// A reply holds at most this many programs, each at most kMaxProgramBytes; more is dropped.
inline constexpr std::size_t kMaxPrograms = 16;
inline constexpr std::size_t kMaxProgramBytes = 64 * 1024;

/// Fenced blocks (``` or ~~~, tagged ofl/optiflow/dsl/text or untagged; blocks tagged with
/// another language such as python or json are skipped). Without fences: the paragraphs that
/// parse as programs, or the whole reply if it does. `finish_reason` "length" marks a reply
/// cut at the token limit.
ExtractedPrograms extract_programs(std::string_view reply, std::string_view finish_reason);

}  // namespace optiflow::llm
