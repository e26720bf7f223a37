// Canonical text of a DSL program; parse_program(print_program(p)) has p's structure.
#include <cctype>
#include <variant>

#include "optiflow/dsl/parser.hpp"

namespace optiflow::dsl {
namespace {

// How tightly `e` binds (dsl/operators.hpp); leaves and bracketed forms bind tightest.
int level_of(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::ternary:
      return kTernaryPrecedence;
    case Expr::Kind::binary:
    case Expr::Kind::unary:
      return precedence(e.op);
    default:
      return kUnaryPrecedence + 1;
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
      text = std::string(spelling(e.op)) + print_at(e.args[0], kUnaryPrecedence);
      break;
    case Expr::Kind::binary: {
      const int level = precedence(e.op);
      // Left-associative; comparisons do not chain, so both sides of one need to bind tighter.
      const int left_min = level == kComparisonPrecedence ? level + 1 : level;
      text = print_at(e.args[0], left_min) + " " + std::string(spelling(e.op)) + " " +
             print_at(e.args[1], level + 1);
      break;
    }
    case Expr::Kind::ternary:
      text = print_at(e.args[0], kLoosestBinary) + " ? " + print_at(e.args[1], kTernaryPrecedence) +
             " : " + print_at(e.args[2], kTernaryPrecedence);
      break;
    case Expr::Kind::tuple: {
      text = "(";
      for (std::size_t i = 0; i < e.args.size(); ++i)
        text += (i ? ", " : "") + print_at(e.args[i], kTernaryPrecedence);
      return text + ")";
    }
    case Expr::Kind::range:
      return print_at(e.args[0], kTernaryPrecedence) + ".." +
             print_at(e.args[1], kTernaryPrecedence);
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

// Each statement kind appends its text after the indentation `pad`; blocks nest at `indent`.
class StatementPrinter {
 public:
  StatementPrinter(int indent, std::string& out)
      : indent_(indent), pad_(static_cast<std::size_t>(indent) * 2, ' '), out_(out) {}

  void operator()(const Step& s) {
    out_ += std::string(to_string(s.pattern));
    if (s.pattern == Pattern::kary) out_ += " " + std::to_string(s.arity);
    out_ += " over " + print_groups(s.groups);
    if (s.reverse) out_ += " reverse";
  }
  void operator()(const Let& s) { out_ += "let " + s.name + " = " + print_expr(s.value); }
  void operator()(const Pipeline& s) { out_ += "pipeline " + print_expr(s.value); }
  void operator()(const Channels& s) { out_ += "channels " + print_expr(s.value); }
  void operator()(const Protocol& s) { out_ += "protocol " + s.name; }
  void operator()(const SplitEven& s) {
    out_ += "split " + print_expr(s.parts) + " as " + s.name + " {\n";
    print_block(s.body, indent_ + 1, out_);
    out_ += pad_ + "}";
  }
  void operator()(const SplitWeighted& s) {
    out_ += "split {\n";
    for (const Branch& b : s.branches) {
      out_ += pad_ + "  weight " + print_expr(b.weight) + " {\n";
      print_block(b.body, indent_ + 2, out_);
      out_ += pad_ + "  }\n";
    }
    out_ += pad_ + "}";
  }
  void operator()(const Route& s) {
    out_ += "route " + print_expr(s.from) + " -> " + print_expr(s.to) + " via";
    for (const Expr& node : s.via) out_ += " " + print_expr(node);
  }
  void operator()(const Avoid& s) {
    out_ += "avoid ";
    for (std::size_t i = 0; i < s.links.size(); ++i)
      out_ += (i ? ", " : "") + node_text(s.links[i].from) + (s.links[i].both ? " <-> " : " -> ") +
              node_text(s.links[i].to);
  }

  void print(const Statement& s) {
    out_ += pad_;
    std::visit(*this, s.node);
    out_ += "\n";
  }

 private:
  int indent_;
  std::string pad_;
  std::string& out_;
};

void print_block(const Block& block, int indent, std::string& out) {
  StatementPrinter printer(indent, out);
  for (const Statement& s : block) printer.print(s);
}

}  // namespace

std::string print_expr(const Expr& expr) {
  return print_at(expr, kTernaryPrecedence);
}

std::string print_program(const Program& program) {
  std::string out;
  print_block(program.body, 0, out);
  return out;
}

}  // namespace optiflow::dsl
