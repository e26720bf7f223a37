// Errors for bad user input (files, programs, command arguments), located in the input.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace optiflow::support {

/// Where in a user's input something went wrong. `line`/`column` are 1-based; 0 means unknown.
/// `field` is a path into structured input such as `links[3].bw_GBps` (empty when not applicable).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string field;
};

/// Renders `file:line:col: error: field: message`, omitting the parts that are unknown.
std::string format_diagnostic(const SourceLocation& where, const std::string& message);

/// How much of a source line an excerpt shows, at most (plus the "..." of each cut).
inline constexpr std::size_t kExcerptWidth = 100;

/// Two lines, each indented by two spaces: `line` and a caret under its `column` (1-based,
/// in bytes; tabs are kept in the caret's indent so that it lines up). A line longer than
/// kExcerptWidth (a model's reply can be one line of 200 KB) is cut to a window around the
/// column, with "..." where it was cut; the caret still points at the same character.
std::string format_source_excerpt(std::string_view line, int column);

/// Thrown for malformed input; `what()` is one line that names the file, the place and the field.
/// Never thrown for our own invariants (those are asserts).
class InputError : public std::runtime_error {
 public:
  InputError(SourceLocation where, const std::string& message)
      : std::runtime_error(format_diagnostic(where, message)), where_(std::move(where)) {}

  const SourceLocation& where() const { return where_; }

 private:
  SourceLocation where_;
};

}  // namespace optiflow::support
