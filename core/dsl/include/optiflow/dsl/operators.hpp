// The DSL's operators: one table of spellings and binding strengths, shared by the lexer, the
// parser, the printer and the compiler's evaluator (docs/dsl.md, "Expressions").
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace optiflow::dsl {

/// Unary and binary operators, in the order of kOperators.
enum class Op {
  logical_or,
  logical_and,
  equal,
  not_equal,
  less,
  less_equal,
  greater,
  greater_equal,
  plus,
  minus,
  times,
  divide,
  modulo,
  negate,
  logical_not,
};

/// Binding strengths: binary operators from kLoosestBinary to kTightestBinary (higher binds
/// tighter), then the unary ones. The ternary `c ? a : b` is looser than all of them.
inline constexpr int kTernaryPrecedence = 0;
inline constexpr int kLoosestBinary = 1;
inline constexpr int kComparisonPrecedence = 3;  ///< comparisons do not chain: a < b < c
inline constexpr int kTightestBinary = 5;
inline constexpr int kUnaryPrecedence = 6;

/// One operator: how it is spelt and how tightly it binds.
struct OperatorInfo {
  Op op;
  std::string_view spelling;
  int precedence;
};

/// Every operator, indexed by Op. "-" is both a binary and a unary operator.
inline constexpr std::array<OperatorInfo, 15> kOperators{{
    {Op::logical_or, "||", 1},
    {Op::logical_and, "&&", 2},
    {Op::equal, "==", kComparisonPrecedence},
    {Op::not_equal, "!=", kComparisonPrecedence},
    {Op::less, "<", kComparisonPrecedence},
    {Op::less_equal, "<=", kComparisonPrecedence},
    {Op::greater, ">", kComparisonPrecedence},
    {Op::greater_equal, ">=", kComparisonPrecedence},
    {Op::plus, "+", 4},
    {Op::minus, "-", 4},
    {Op::times, "*", kTightestBinary},
    {Op::divide, "/", kTightestBinary},
    {Op::modulo, "%", kTightestBinary},
    {Op::negate, "-", kUnaryPrecedence},
    {Op::logical_not, "!", kUnaryPrecedence},
}};

constexpr bool operators_in_enum_order() {
  for (std::size_t i = 0; i < kOperators.size(); ++i)
    if (static_cast<std::size_t>(kOperators[i].op) != i) return false;
  return true;
}
static_assert(operators_in_enum_order(), "kOperators must be indexed by Op");

/// How `op` is written.
constexpr std::string_view spelling(Op op) {
  return kOperators[static_cast<std::size_t>(op)].spelling;
}

/// How tightly `op` binds (kLoosestBinary .. kUnaryPrecedence).
constexpr int precedence(Op op) {
  return kOperators[static_cast<std::size_t>(op)].precedence;
}

constexpr bool is_unary(Op op) {
  return precedence(op) == kUnaryPrecedence;
}

/// The binary operator spelt `text`, if there is one.
constexpr std::optional<Op> binary_operator(std::string_view text) {
  for (const OperatorInfo& info : kOperators)
    if (info.spelling == text && !is_unary(info.op)) return info.op;
  return std::nullopt;
}

/// The unary operator spelt `text`, if there is one.
constexpr std::optional<Op> unary_operator(std::string_view text) {
  for (const OperatorInfo& info : kOperators)
    if (info.spelling == text && is_unary(info.op)) return info.op;
  return std::nullopt;
}

/// Whether `text` is an operator's spelling (the lexer makes a token of it).
constexpr bool is_operator(std::string_view text) {
  return binary_operator(text).has_value() || unary_operator(text).has_value();
}

}  // namespace optiflow::dsl
