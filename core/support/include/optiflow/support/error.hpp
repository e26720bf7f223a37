// Errors for bad user input (files, programs, command arguments), located in the input, and
// for requests a library does not serve (UnsupportedError).
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

/// Thrown for a bad option of a library call: `option()` is its name among the call's options
/// ("resume", "with", "sizes"), never a command-line flag: the CLI names the flag it came from,
/// the GUI its control. `file()` is the file that is the place, if one is (the database a run
/// is resumed from); `what()` reads "FILE: error: option: message" ("options" for no file).
class OptionError : public InputError {
 public:
  OptionError(const std::string& option, const std::string& message, const std::string& file = {})
      : InputError(SourceLocation{file.empty() ? "options" : file, 0, 0, option}, message),
        option_(option),
        message_(message),
        file_(file) {}

  const std::string& option() const { return option_; }
  /// The message alone, without the place.
  const std::string& message() const { return message_; }
  const std::string& file() const { return file_; }

 private:
  std::string option_, message_, file_;
};

/// Thrown when a library is asked for something it does not do: a baseline or a bound for a
/// collective it does not build, a bound on a topology that has none. Not an InputError: a
/// caller that only asks "is there one?" (a table's NCCL column, a stored bound) catches this
/// and nothing else, so that real input errors still reach the user. It names what is
/// unsupported, never a command-line flag; the CLI maps `subject()` to the flag.
class UnsupportedError : public std::runtime_error {
 public:
  enum class Subject { collective, topology };

  /// `where`: the place in an input file that makes the request unsupported, if one does (a
  /// topology's links); `what()` is then located there as an InputError's is.
  UnsupportedError(Subject subject, const std::string& message, SourceLocation where = {})
      : std::runtime_error(where.file.empty() ? message : format_diagnostic(where, message)),
        subject_(subject),
        message_(message),
        where_(std::move(where)) {}

  Subject subject() const { return subject_; }
  /// The message alone, without the place.
  const std::string& message() const { return message_; }
  const SourceLocation& where() const { return where_; }

 private:
  Subject subject_;
  std::string message_;
  SourceLocation where_;
};

}  // namespace optiflow::support
