// The values of DSL expressions (docs/dsl.md, "Expressions"): exact fractions, and tuples of
// them as `by` keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval_context.hpp"

namespace optiflow::compiler {

/// One element: a number; more: a tuple (only as a `by` key).
using Value = std::vector<support::Rational>;

/// `member` for expressions outside `by`, `where` and `weight`, where rank, host and local
/// have no value.
inline constexpr std::int32_t kNoMember = -1;

/// Evaluates expressions against a block's variables; every node evaluated counts as one unit
/// of work. In `by` and `where`, rank, host and local are `member`'s; in `weight`, those of
/// the rank whose data is split.
class Expressions {
 public:
  explicit Expressions(EvalContext& context) : context_(context) {}

  Value eval(const dsl::Expr& e, const Variables& vars, std::int32_t member);
  /// A single number; a tuple is an error.
  support::Rational number(const dsl::Expr& e, const Variables& vars, std::int32_t member);
  /// An integer from `lo` to `hi`; otherwise an error saying that `what` must be one.
  std::int64_t integer(const dsl::Expr& e, const Variables& vars, std::int32_t member,
                       std::int64_t lo, std::int64_t hi, const std::string& what);
  /// A rank of the topology (a number or a GPU's @node).
  std::int32_t rank(const dsl::Expr& e, const Variables& vars);

 private:
  support::Rational node_rank(const dsl::Expr& e) const;
  support::Rational binary(const dsl::Expr& e, const Variables& vars, std::int32_t member);
  support::Rational quotient(const dsl::Expr& e, support::Rational a, support::Rational b) const;
  support::Rational name_value(const dsl::Expr& e, const Variables& vars,
                               std::int32_t member) const;

  EvalContext& context_;
};

}  // namespace optiflow::compiler
