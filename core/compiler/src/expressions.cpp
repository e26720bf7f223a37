// Evaluating DSL expressions exactly, each operator by its dsl::Op.
#include "expressions.hpp"

namespace optiflow::compiler {

std::int32_t Expressions::rank(const dsl::Expr& e, const Variables& vars) {
  return static_cast<std::int32_t>(integer(e, vars, kNoMember, 0, context_.ranks() - 1, "a rank"));
}

std::int64_t Expressions::integer(const dsl::Expr& e, const Variables& vars, std::int32_t member,
                                  std::int64_t lo, std::int64_t hi, const std::string& what) {
  const support::Rational v = number(e, vars, member);
  if (!v.is_integer() || v.num() < lo || v.num() > hi)
    context_.fail(e.pos, what + " must be an integer from " + std::to_string(lo) + " to " +
                             std::to_string(hi) + ", not " + v.to_string());
  return v.num();
}

support::Rational Expressions::number(const dsl::Expr& e, const Variables& vars,
                                      std::int32_t member) {
  const Value v = eval(e, vars, member);
  if (v.size() != 1) context_.fail(e.pos, "a tuple (a, b) is only allowed after 'by'");
  return v.front();
}

Value Expressions::eval(const dsl::Expr& e, const Variables& vars, std::int32_t member) {
  context_.spend(1, e.pos);
  switch (e.kind) {
    case dsl::Expr::Kind::number:
      return {e.number};
    case dsl::Expr::Kind::name:
      return {name_value(e, vars, member)};
    case dsl::Expr::Kind::node:
      return {node_rank(e)};
    case dsl::Expr::Kind::tuple: {
      Value out;
      for (const dsl::Expr& item : e.args) out.push_back(number(item, vars, member));
      return out;
    }
    case dsl::Expr::Kind::range:
      context_.fail(e.pos, "a range a..b is only allowed in a list of ranks");
    case dsl::Expr::Kind::unary: {
      const support::Rational a = number(e.args[0], vars, member);
      if (e.op == dsl::Op::negate) return {context_.checked(sub(support::Rational(0), a), e.pos)};
      return {support::Rational(a == support::Rational(0) ? 1 : 0)};
    }
    case dsl::Expr::Kind::ternary:
      return eval(number(e.args[0], vars, member) != support::Rational(0) ? e.args[1] : e.args[2],
                  vars, member);
    case dsl::Expr::Kind::binary:
      return {binary(e, vars, member)};
  }
  context_.fail(e.pos, "internal: unknown expression");
}

support::Rational Expressions::node_rank(const dsl::Expr& e) const {
  const topology::Node& n = context_.topo().node(context_.node(e.text, e.pos));
  if (n.kind != topology::NodeKind::gpu)
    context_.fail(e.pos, "@" + e.text + " is a " + std::string(to_string(n.kind)) +
                             ", not a gpu: only gpus have ranks");
  return support::Rational(n.rank);
}

support::Rational Expressions::binary(const dsl::Expr& e, const Variables& vars,
                                      std::int32_t member) {
  using dsl::Op;
  const support::Rational zero(0);
  const support::Rational a = number(e.args[0], vars, member);
  // && and || leave their right side unevaluated when the left decides.
  if (e.op == Op::logical_and && a == zero) return zero;
  if (e.op == Op::logical_or && a != zero) return support::Rational(1);
  const support::Rational b = number(e.args[1], vars, member);
  auto truth = [](bool x) { return support::Rational(x ? 1 : 0); };
  switch (e.op) {
    case Op::logical_or:
    case Op::logical_and:
      return truth(b != zero);
    case Op::equal:
      return truth(a == b);
    case Op::not_equal:
      return truth(a != b);
    case Op::less:
      return truth(a < b);
    case Op::less_equal:
      return truth(a <= b);
    case Op::greater:
      return truth(a > b);
    case Op::greater_equal:
      return truth(a >= b);
    case Op::plus:
      return context_.checked(add(a, b), e.pos);
    case Op::minus:
      return context_.checked(sub(a, b), e.pos);
    case Op::times:
      return context_.checked(mul(a, b), e.pos);
    case Op::divide:
    case Op::modulo:
      return quotient(e, a, b);
    case Op::negate:
    case Op::logical_not:
      break;
  }
  context_.fail(e.pos,
                "internal: unary operator '" + std::string(spelling(e.op)) + "' with two operands");
}

// a / b, or a % b (non-negative for a positive divisor).
support::Rational Expressions::quotient(const dsl::Expr& e, support::Rational a,
                                        support::Rational b) const {
  if (b == support::Rational(0)) context_.fail(e.pos, "division by zero");
  if (e.op == dsl::Op::divide) return context_.checked(div(a, b), e.pos);
  if (!a.is_integer() || !b.is_integer()) context_.fail(e.pos, "'%' needs integers");
  const std::int64_t mod = a.num() % b.num();
  return support::Rational(mod != 0 && ((mod < 0) != (b.num() < 0)) ? mod + b.num() : mod);
}

support::Rational Expressions::name_value(const dsl::Expr& e, const Variables& vars,
                                          std::int32_t member) const {
  if (auto it = vars.find(e.text); it != vars.end()) return it->second;
  if (e.text == "nranks") return support::Rational(context_.ranks());
  if (e.text == "nhosts") return support::Rational(context_.hosts());
  if (e.text == "nlocal") return support::Rational(context_.locals());
  if (e.text == "rank" || e.text == "host" || e.text == "local") {
    if (member == kNoMember)
      context_.fail(e.pos, "'" + e.text +
                               "' has no value here: it is the member's in 'by' and 'where', "
                               "and the data's source rank's in 'weight'");
    const topology::Node& n = context_.topo().node(context_.topo().gpu_of_rank(member));
    return support::Rational(e.text == "rank" ? n.rank : (e.text == "host" ? n.host : n.local));
  }
  context_.fail(e.pos, "unknown name '" + e.text +
                           "' (names: rank, host, local, nranks, nhosts, nlocal, and those bound "
                           "by let or split ... as)");
}

}  // namespace optiflow::compiler
