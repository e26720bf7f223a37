// Errors for bad user input (files, programs, command arguments), located in the input.
#pragma once

#include <stdexcept>
#include <string>

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
