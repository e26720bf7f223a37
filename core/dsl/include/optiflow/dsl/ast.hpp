// The syntax tree of an OptiFlow DSL program (docs/dsl.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optiflow/support/rational.hpp"

namespace optiflow::dsl {

/// Where a node was written. Positions do not take part in equality, so that
/// parse(print(p)) == p compares structure only.
struct SourcePos {
  int line = 0;
  int column = 0;
  bool operator==(const SourcePos&) const { return true; }
};

struct Expr {
  enum class Kind { number, name, node, unary, binary, ternary, tuple, range };
  Kind kind = Kind::number;
  support::Rational number;  ///< number
  std::string text;        ///< name, node id (without '@'), or operator ("-", "!", "+", "==", ...)
  std::vector<Expr> args;  ///< operands: unary 1, binary 2, ternary 3, tuple n, range 2
  SourcePos pos;

  bool operator==(const Expr&) const = default;
};

/// The rank groups a step runs in, each ordered.
struct GroupSpec {
  enum class Kind { all, hosts, rails, under, lists };
  Kind kind = Kind::all;
  std::string node;                      ///< under: the switch's node id
  std::vector<std::vector<Expr>> lists;  ///< lists: one entry per group (ranks, @gpus, a..b)
  std::optional<Expr> where;             ///< keep members for which it is non-zero
  std::optional<Expr> by;                ///< order members by this key (a number or a tuple)

  bool operator==(const GroupSpec&) const = default;
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

struct Branch {
  Expr weight;
  Block body;
  bool operator==(const Branch&) const = default;
};

struct Statement {
  enum class Kind {
    step,
    split_even,
    split_weighted,
    let,
    route,
    avoid,
    pipeline,
    channels,
    protocol
  };
  Kind kind = Kind::step;
  SourcePos pos;

  // step
  Pattern pattern = Pattern::ring;
  int arity = 0;  ///< kary's K
  GroupSpec groups;
  bool reverse = false;

  // split_even: `split PARTS as VAR { body }`; let: `let VAR = value`;
  // pipeline/channels: `pipeline VALUE`; protocol: `protocol NAME` (var holds the name)
  Expr value;
  std::string var;
  Block body;

  // split_weighted: `split { weight W { ... } weight W { ... } }`
  std::vector<Branch> branches;

  // route: `route FROM -> TO via N1 N2 ...`; avoid: `avoid A -> B, C <-> D`
  Expr from, to;
  std::vector<Expr> via;  ///< node expressions (@id), so that errors can point at each
  std::vector<LinkRef> links;

  bool operator==(const Statement&) const = default;
};

struct Program {
  Block body;
  bool operator==(const Program&) const = default;
};

}  // namespace optiflow::dsl
