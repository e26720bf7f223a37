// Canonical text of a DSL program; parse_program(print_program(p)) == p.
#include <array>

#include "optiflow/dsl/parser.hpp"

namespace optiflow::dsl {
namespace {

// Binding strength of binary operators; higher binds tighter (matches the parser's levels).
int precedence(const std::string& op) {
  constexpr std::array<std::pair<std::string_view, int>, 13> kTable{{{"||", 1},
                                                                     {"&&", 2},
                                                                     {"==", 3},
                                                                     {"!=", 3},
                                                                     {"<", 3},
                                                                     {"<=", 3},
                                                                     {">", 3},
                                                                     {">=", 3},
                                                                     {"+", 4},
                                                                     {"-", 4},
                                                                     {"*", 5},
                                                                     {"/", 5},
                                                                     {"%", 5}}};
  for (const auto& [name, level] : kTable)
    if (name == op) return level;
  return 0;
}

constexpr int kTernaryLevel = 0;
constexpr int kUnaryLevel = 6;

int level_of(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::ternary:
      return kTernaryLevel;
    case Expr::Kind::binary:
      return precedence(e.text);
    case Expr::Kind::unary:
      return kUnaryLevel;
    default:
      return kUnaryLevel + 1;
  }
}

// Bare ids are identifier characters with single dots between them (the lexer's rule, so
// that "@a..b" is a range); anything else is quoted.
std::string node_text(const std::string& id) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  bool bare = !id.empty();
  for (std::size_t i = 0; i < id.size() && bare; ++i)
    bare = ident(id[i]) || (id[i] == '.' && i + 1 < id.size() && ident(id[i + 1]));
  return bare ? "@" + id : "@\"" + id + "\"";
}

// Prints `e`, parenthesised when it binds looser than `min_level` requires.
std::string print_at(const Expr& e, int min_level) {
  std::string text;
  switch (e.kind) {
    case Expr::Kind::number:
      text = e.number.to_string();
      break;
    case Expr::Kind::name:
      text = e.text;
      break;
    case Expr::Kind::node:
      text = node_text(e.text);
      break;
    case Expr::Kind::unary:
      text = e.text + print_at(e.args[0], kUnaryLevel);
      break;
    case Expr::Kind::binary: {
      const int level = precedence(e.text);
      // Left-associative; comparisons do not chain, so both sides of one need to bind tighter.
      const int left_min = level == 3 ? level + 1 : level;
      text = print_at(e.args[0], left_min) + " " + e.text + " " + print_at(e.args[1], level + 1);
      break;
    }
    case Expr::Kind::ternary:
      text = print_at(e.args[0], 1) + " ? " + print_at(e.args[1], kTernaryLevel) + " : " +
             print_at(e.args[2], kTernaryLevel);
      break;
    case Expr::Kind::tuple: {
      text = "(";
      for (std::size_t i = 0; i < e.args.size(); ++i)
        text += (i ? ", " : "") + print_at(e.args[i], kTernaryLevel);
      return text + ")";
    }
    case Expr::Kind::range:
      return print_at(e.args[0], kTernaryLevel) + ".." + print_at(e.args[1], kTernaryLevel);
  }
  return level_of(e) < min_level ? "(" + text + ")" : text;
}

std::string print_list(const std::vector<Expr>& items) {
  std::string text = "[";
  for (std::size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + print_expr(items[i]);
  return text + "]";
}

std::string print_groups(const GroupSpec& g) {
  std::string text;
  switch (g.kind) {
    case GroupSpec::Kind::all:
      text = "all";
      break;
    case GroupSpec::Kind::hosts:
      text = "hosts";
      break;
    case GroupSpec::Kind::rails:
      text = "rails";
      break;
    case GroupSpec::Kind::under:
      text = "under " + node_text(g.node);
      break;
    case GroupSpec::Kind::lists:
      if (g.lists.size() == 1) {
        text = print_list(g.lists.front());
      } else {
        text = "[";
        for (std::size_t i = 0; i < g.lists.size(); ++i)
          text += (i ? ", " : "") + print_list(g.lists[i]);
        text += "]";
      }
      break;
  }
  if (g.where) text += " where " + print_expr(*g.where);
  if (g.by) text += " by " + print_expr(*g.by);
  return text;
}

void print_block(const Block& block, int indent, std::string& out);

void print_statement(const Statement& s, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
  out += pad;
  switch (s.kind) {
    case Statement::Kind::step:
      out += std::string(to_string(s.pattern));
      if (s.pattern == Pattern::kary) out += " " + std::to_string(s.arity);
      out += " over " + print_groups(s.groups);
      if (s.reverse) out += " reverse";
      break;
    case Statement::Kind::let:
      out += "let " + s.var + " = " + print_expr(s.value);
      break;
    case Statement::Kind::pipeline:
      out += "pipeline " + print_expr(s.value);
      break;
    case Statement::Kind::channels:
      out += "channels " + print_expr(s.value);
      break;
    case Statement::Kind::protocol:
      out += "protocol " + s.var;
      break;
    case Statement::Kind::split_even:
      out += "split " + print_expr(s.value) + " as " + s.var + " {\n";
      print_block(s.body, indent + 1, out);
      out += pad + "}";
      break;
    case Statement::Kind::split_weighted:
      out += "split {\n";
      for (const Branch& b : s.branches) {
        out += pad + "  weight " + print_expr(b.weight) + " {\n";
        print_block(b.body, indent + 2, out);
        out += pad + "  }\n";
      }
      out += pad + "}";
      break;
    case Statement::Kind::route:
      out += "route " + print_expr(s.from) + " -> " + print_expr(s.to) + " via";
      for (const Expr& node : s.via) out += " " + print_expr(node);
      break;
    case Statement::Kind::avoid:
      out += "avoid ";
      for (std::size_t i = 0; i < s.links.size(); ++i)
        out += (i ? ", " : "") + node_text(s.links[i].from) + (s.links[i].both ? " <-> " : " -> ") +
               node_text(s.links[i].to);
      break;
  }
  out += "\n";
}

void print_block(const Block& block, int indent, std::string& out) {
  for (const Statement& s : block) print_statement(s, indent, out);
}

}  // namespace

std::string print_expr(const Expr& expr) {
  return print_at(expr, kTernaryLevel);
}

std::string print_program(const Program& program) {
  std::string out;
  print_block(program.body, 0, out);
  return out;
}

}  // namespace optiflow::dsl
