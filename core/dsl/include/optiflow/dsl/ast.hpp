// The syntax tree of an OptiFlow DSL program (docs/dsl.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "optiflow/dsl/operators.hpp"
#include "optiflow/support/rational.hpp"

namespace optiflow::dsl {

/// Where a node was written (1-based; 0 for nodes built rather than parsed).
struct SourcePos {
  int line = 0;
  int column = 0;
  bool operator==(const SourcePos&) const = default;
};

// The tree types have no operator==: a parsed tree and the same tree built in code differ in
// their positions, so callers say which comparison they mean (same_structure below).

/// An expression; `kind` says which of the fields below it uses.
struct Expr {
  enum class Kind { number, name, node, unary, binary, ternary, tuple, range };
  Kind kind = Kind::number;
  Op op = Op::plus;          ///< unary, binary: the operator
  support::Rational number;  ///< number
  std::string text;          ///< name, or node id (without '@')
  std::vector<Expr> args;    ///< operands: unary 1, binary 2, ternary 3, tuple n, range 2
  SourcePos pos;

  /// A node of each kind, for the parser and for code that builds programs (which leaves
  /// `pos` at 0:0).
  static Expr make_number(support::Rational value, SourcePos pos = {});
  static Expr make_name(std::string name, SourcePos pos = {});
  static Expr make_node(std::string id, SourcePos pos = {});
  static Expr make_unary(Op op, Expr operand, SourcePos pos = {});
  static Expr make_binary(Op op, Expr left, Expr right, SourcePos pos = {});
  static Expr make_ternary(Expr condition, Expr yes, Expr no, SourcePos pos = {});
  static Expr make_tuple(std::vector<Expr> items, SourcePos pos = {});
  static Expr make_range(Expr first, Expr last, SourcePos pos = {});
};

/// The rank groups a step runs in, each ordered.
struct GroupSpec {
  enum class Kind { all, hosts, rails, under, lists };
  Kind kind = Kind::all;
  std::string node;                      ///< under: the switch's node id
  std::vector<std::vector<Expr>> lists;  ///< lists: one entry per group (ranks, @gpus, a..b)
  std::optional<Expr> where;             ///< keep members for which it is non-zero
  std::optional<Expr> by;                ///< order members by this key (a number or a tuple)
};

enum class Pattern {
  ring,
  direct,
  binomial,
  binary,
  kary,
  chain,
  dbtree,
  rd,
  bruck,
  scatter,
  bfs,
  pack
};
std::string_view to_string(Pattern pattern);
std::optional<Pattern> pattern_from_string(std::string_view name);

/// A directed link named by its endpoints; `both` also names the reverse link.
struct LinkRef {
  std::string from;
  std::string to;
  bool both = false;
  bool operator==(const LinkRef&) const = default;
};

struct Statement;
using Block = std::vector<Statement>;

/// `PATTERN [K] over GROUPS [where E] [by E] [reverse]`: one step of the dissemination.
struct Step {
  Pattern pattern = Pattern::ring;
  int arity = 0;  ///< kary's K
  GroupSpec groups;
  bool reverse = false;
};

/// `split PARTS as NAME { body }`: the body runs once per equal part, NAME its index.
struct SplitEven {
  Expr parts;
  std::string name;
  Block body;
};

/// `weight W { body }` inside `split { ... }`.
struct Branch {
  Expr weight;
  Block body;
};

/// `split { weight W { ... } weight W { ... } }`
struct SplitWeighted {
  std::vector<Branch> branches;
};

/// `let NAME = VALUE`
struct Let {
  std::string name;
  Expr value;
};

/// `route FROM -> TO via N1 N2 ...`
struct Route {
  Expr from, to;
  std::vector<Expr> via;  ///< node expressions (@id), so that errors can point at each
};

/// `avoid A -> B, C <-> D`
struct Avoid {
  std::vector<LinkRef> links;
};

/// `pipeline DEPTH`
struct Pipeline {
  Expr value;
};

/// `channels COUNT`
struct Channels {
  Expr value;
};

/// `protocol NAME`, NAME one of NCCL's LL, LL128, Simple.
struct Protocol {
  std::string name;
};

/// One statement: its kind's fields, and where it starts.
struct Statement {
  std::variant<Step, SplitEven, SplitWeighted, Let, Route, Avoid, Pipeline, Channels, Protocol>
      node;
  SourcePos pos;

  /// Whether the statement is a `Kind` (Step, Let, ...).
  template <typename Kind>
  bool is() const {
    return std::holds_alternative<Kind>(node);
  }
  /// The statement as a `Kind`, or nullptr when it is another kind.
  template <typename Kind>
  Kind* get_if() {
    return std::get_if<Kind>(&node);
  }
  template <typename Kind>
  const Kind* get_if() const {
    return std::get_if<Kind>(&node);
  }
};

/// A whole program: its top-level block.
struct Program {
  Block body;
};

/// Whether two trees are equal apart from their source positions: parse_program(print_program(p))
/// has the same structure as p, not the same positions.
bool same_structure(const Program& a, const Program& b);
bool same_structure(const Statement& a, const Statement& b);
bool same_structure(const GroupSpec& a, const GroupSpec& b);
bool same_structure(const Expr& a, const Expr& b);

}  // namespace optiflow::dsl
