// Parsing and printing OptiFlow DSL programs (docs/dsl.md).
#pragma once

#include <string>
#include <string_view>

#include "optiflow/dsl/ast.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::dsl {

/// An error located in a DSL program. what() is `file:line:col: error: message`;
/// render() adds the source line (cut around the column when long) and a caret under the
/// column, for people and models (support::format_source_excerpt).
class DslError : public support::InputError {
 public:
  DslError(support::SourceLocation where, const std::string& message, std::string source_line)
      : support::InputError(std::move(where), message), source_line_(std::move(source_line)) {}
  std::string render() const;

 private:
  std::string source_line_;
};

/// Limits that keep hostile input cheap to reject.
inline constexpr std::size_t kMaxProgramBytes = 256 * 1024;
inline constexpr int kMaxNesting = 32;

/// Parses a whole program; `source` names it in diagnostics. Throws DslError.
Program parse_program(std::string_view text, const std::string& source);

/// Canonical text of a program: one statement per line, blocks indented by two spaces,
/// minimal parentheses. same_structure(parse_program(print_program(p)), p) holds.
std::string print_program(const Program& program);
std::string print_expr(const Expr& expr);

/// The source line `line` (1-based) of `text`, for diagnostics.
std::string source_line(std::string_view text, int line);

}  // namespace optiflow::dsl
