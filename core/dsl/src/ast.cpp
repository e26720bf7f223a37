// Building expression nodes, and comparing syntax trees by structure (positions left out).
#include "optiflow/dsl/ast.hpp"

#include <type_traits>
#include <utility>

namespace optiflow::dsl {

Expr Expr::make_number(support::Rational value, SourcePos pos) {
  return Expr{Kind::number, Op::plus, value, {}, {}, pos};
}
Expr Expr::make_name(std::string name, SourcePos pos) {
  return Expr{Kind::name, Op::plus, {}, std::move(name), {}, pos};
}
Expr Expr::make_node(std::string id, SourcePos pos) {
  return Expr{Kind::node, Op::plus, {}, std::move(id), {}, pos};
}
Expr Expr::make_unary(Op op, Expr operand, SourcePos pos) {
  return Expr{Kind::unary, op, {}, {}, {std::move(operand)}, pos};
}
Expr Expr::make_binary(Op op, Expr left, Expr right, SourcePos pos) {
  return Expr{Kind::binary, op, {}, {}, {std::move(left), std::move(right)}, pos};
}
Expr Expr::make_ternary(Expr condition, Expr yes, Expr no, SourcePos pos) {
  return Expr{
      Kind::ternary, Op::plus, {}, {}, {std::move(condition), std::move(yes), std::move(no)}, pos};
}
Expr Expr::make_tuple(std::vector<Expr> items, SourcePos pos) {
  return Expr{Kind::tuple, Op::plus, {}, {}, std::move(items), pos};
}
Expr Expr::make_range(Expr first, Expr last, SourcePos pos) {
  return Expr{Kind::range, Op::plus, {}, {}, {std::move(first), std::move(last)}, pos};
}

namespace {

// Declared up front: the overloads call one another through the trees' recursion.
bool same_node(const Expr& a, const Expr& b);
bool same_node(const std::vector<Expr>& a, const std::vector<Expr>& b);
bool same_node(const GroupSpec& a, const GroupSpec& b);
bool same_node(const Statement& a, const Statement& b);
bool same_node(const Branch& a, const Branch& b);

template <typename T>
bool same_items(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same_node(a[i], b[i])) return false;
  return true;
}

bool same_optional(const std::optional<Expr>& a, const std::optional<Expr>& b) {
  return a.has_value() == b.has_value() && (!a || same_node(*a, *b));
}

bool same_node(const Expr& a, const Expr& b) {
  const bool has_op = a.kind == Expr::Kind::unary || a.kind == Expr::Kind::binary;
  return a.kind == b.kind && (!has_op || a.op == b.op) && a.number == b.number &&
         a.text == b.text && same_items(a.args, b.args);
}
bool same_node(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  return same_items(a, b);
}
bool same_node(const GroupSpec& a, const GroupSpec& b) {
  return a.kind == b.kind && a.node == b.node && same_items(a.lists, b.lists) &&
         same_optional(a.where, b.where) && same_optional(a.by, b.by);
}
bool same_node(const Branch& a, const Branch& b) {
  return same_node(a.weight, b.weight) && same_items(a.body, b.body);
}

// One overload per statement kind; same_node(Statement) visits the kind both sides share.
bool same_kind(const Step& a, const Step& b) {
  return a.pattern == b.pattern && a.arity == b.arity && same_node(a.groups, b.groups) &&
         a.reverse == b.reverse;
}
bool same_kind(const SplitEven& a, const SplitEven& b) {
  return same_node(a.parts, b.parts) && a.name == b.name && same_items(a.body, b.body);
}
bool same_kind(const SplitWeighted& a, const SplitWeighted& b) {
  return same_items(a.branches, b.branches);
}
bool same_kind(const Let& a, const Let& b) {
  return a.name == b.name && same_node(a.value, b.value);
}
bool same_kind(const Route& a, const Route& b) {
  return same_node(a.from, b.from) && same_node(a.to, b.to) && same_items(a.via, b.via);
}
bool same_kind(const Avoid& a, const Avoid& b) {
  return a.links == b.links;
}
bool same_kind(const Pipeline& a, const Pipeline& b) {
  return same_node(a.value, b.value);
}
bool same_kind(const Channels& a, const Channels& b) {
  return same_node(a.value, b.value);
}
bool same_kind(const Protocol& a, const Protocol& b) {
  return a.name == b.name;
}

bool same_node(const Statement& a, const Statement& b) {
  if (a.node.index() != b.node.index()) return false;
  return std::visit(
      [&b](const auto& kind) {
        return same_kind(kind, std::get<std::decay_t<decltype(kind)>>(b.node));
      },
      a.node);
}

}  // namespace

bool same_structure(const Program& a, const Program& b) {
  return same_items(a.body, b.body);
}
bool same_structure(const Statement& a, const Statement& b) {
  return same_node(a, b);
}
bool same_structure(const GroupSpec& a, const GroupSpec& b) {
  return same_node(a, b);
}
bool same_structure(const Expr& a, const Expr& b) {
  return same_node(a, b);
}

}  // namespace optiflow::dsl
