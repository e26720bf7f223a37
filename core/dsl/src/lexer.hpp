// Tokens of the DSL. Newlines end statements except inside (), [] (they become ';' tokens).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "optiflow/dsl/ast.hpp"

namespace optiflow::dsl {

enum class Tok { ident, number, node, punct, semi, end };

struct Token {
  Tok kind = Tok::end;
  std::string text;  ///< identifier, number literal, node id (no '@'), or punctuation
  SourcePos pos;
};

/// Splits `text` into tokens; on a bad character returns a token list ending in an `end` token
/// whose text holds the error message (the parser reports it at that position).
std::vector<Token> tokenize(std::string_view text);

}  // namespace optiflow::dsl
