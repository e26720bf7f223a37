// Recursive-descent parser for the DSL; the grammar is the EBNF in docs/dsl.md.
#include "optiflow/dsl/parser.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "lexer.hpp"

namespace optiflow::dsl {
namespace {

constexpr std::array<std::pair<Pattern, std::string_view>, 12> kPatternNames{{
    {Pattern::ring, "ring"},
    {Pattern::direct, "direct"},
    {Pattern::binomial, "binomial"},
    {Pattern::binary, "binary"},
    {Pattern::kary, "kary"},
    {Pattern::chain, "chain"},
    {Pattern::dbtree, "dbtree"},
    {Pattern::rd, "rd"},
    {Pattern::bruck, "bruck"},
    {Pattern::scatter, "scatter"},
    {Pattern::bfs, "bfs"},
    {Pattern::pack, "pack"},
}};

constexpr std::array<std::string_view, 18> kKeywords{
    "let",      "split", "as", "weight", "route",   "via", "avoid", "pipeline", "channels",
    "protocol", "over",  "by", "where",  "reverse", "all", "hosts", "rails",    "under"};

// NCCL's protocols, spelt as NCCL and MSCCL XML spell them.
constexpr std::array<std::string_view, 3> kProtocolNames{"LL", "LL128", "Simple"};

bool is_keyword(std::string_view word) {
  for (auto k : kKeywords)
    if (k == word) return true;
  return pattern_from_string(word).has_value();
}

std::string pattern_list() {
  std::string names;
  for (const auto& [p, name] : kPatternNames)
    names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source)
      : text_(text), source_(source), tokens_(tokenize(text)) {}

  Program run() {
    if (tokens_.back().kind == Tok::end && !tokens_.back().text.empty())
      fail_at(tokens_.back().pos, tokens_.back().text);
    Program program;
    program.body = statements(/*in_block=*/false);
    return program;
  }

 private:
  // --- token helpers -------------------------------------------------------------------------
  const Token& peek(std::size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  bool at_punct(std::string_view p) const { return peek().kind == Tok::punct && peek().text == p; }
  bool at_word(std::string_view w) const { return peek().kind == Tok::ident && peek().text == w; }
  const Token& take() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  bool accept_punct(std::string_view p) {
    if (!at_punct(p)) return false;
    ++pos_;
    return true;
  }
  bool accept_word(std::string_view w) {
    if (!at_word(w)) return false;
    ++pos_;
    return true;
  }
  void skip_separators() {
    while (peek().kind == Tok::semi) ++pos_;
  }

  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Tok::end:
        return "the end of the program";
      case Tok::semi:
        return "the end of the statement";
      case Tok::node:
        return "'@" + t.text + "'";
      default:
        return "'" + t.text + "'";
    }
  }

  [[noreturn]] void fail_at(SourcePos pos, const std::string& message) const {
    throw DslError(support::SourceLocation{source_, pos.line, pos.column, {}}, message,
                   source_line(text_, pos.line));
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(peek().pos, message); }

  void expect_punct(std::string_view p, const std::string& context) {
    if (!accept_punct(p))
      fail("expected '" + std::string(p) + "' " + context + ", found " + describe(peek()));
  }
  void expect_word(std::string_view w, const std::string& context) {
    if (!accept_word(w))
      fail("expected '" + std::string(w) + "' " + context + ", found " + describe(peek()));
  }
  std::string expect_node(const std::string& context) {
    if (peek().kind != Tok::node)
      fail("expected a node such as @h0.gpu3 " + context + ", found " + describe(peek()));
    return take().text;
  }
  // A node as an expression, which keeps where it was written.
  Expr node_expr(const std::string& context) {
    const SourcePos pos = peek().pos;
    return Expr::make_node(expect_node(context), pos);
  }

  // --- statements ----------------------------------------------------------------------------
  Block statements(bool in_block) {
    if (++block_depth_ > kMaxNesting)
      fail("blocks are nested more than " + std::to_string(kMaxNesting) + " deep");
    Block block;
    skip_separators();
    while (!(in_block && at_punct("}")) && peek().kind != Tok::end) {
      block.push_back(statement());
      if (peek().kind != Tok::semi && !(in_block && at_punct("}")))
        fail("expected the end of the statement (a new line or ';'), found " + describe(peek()));
      skip_separators();
    }
    --block_depth_;
    return block;
  }

  Block block(const std::string& context) {
    expect_punct("{", context);
    Block body = statements(true);
    expect_punct("}", "to close the block opened " + context);
    return body;
  }

  Statement statement() {
    const SourcePos pos = peek().pos;
    if (peek().kind != Tok::ident)
      fail(
          "expected a statement (a pattern such as 'ring over all', or let, split, route, avoid, "
          "pipeline, channels, protocol), found " +
          describe(peek()));
    const std::string word = peek().text;
    if (word == "let") return {let_statement(), pos};
    if (word == "pipeline") return {Pipeline{setting_value()}, pos};
    if (word == "channels") return {Channels{setting_value()}, pos};
    if (word == "protocol") return {protocol_statement(), pos};
    if (word == "split") return split_statement(pos);
    if (word == "route") return {route_statement(), pos};
    if (word == "avoid") return {avoid_statement(), pos};
    return {step_statement(), pos};
  }

  Expr setting_value() {
    take();
    return expr();
  }

  Protocol protocol_statement() {
    take();
    if (peek().kind != Tok::ident ||
        std::ranges::find(kProtocolNames, peek().text) == kProtocolNames.end())
      fail("expected a protocol after 'protocol' (LL, LL128 or Simple), found " + describe(peek()));
    return Protocol{take().text};
  }

  Let let_statement() {
    take();
    Let let;
    if (peek().kind != Tok::ident || is_keyword(peek().text))
      fail("expected a name after 'let', found " + describe(peek()));
    let.name = take().text;
    expect_punct("=", "after 'let " + let.name + "'");
    let.value = expr();
    return let;
  }

  Statement split_statement(SourcePos pos) {
    take();
    if (at_punct("{")) return {split_weighted(), pos};
    SplitEven split;
    split.parts = expr();
    expect_word("as", "in 'split N as NAME { ... }'");
    if (peek().kind != Tok::ident || is_keyword(peek().text))
      fail("expected a name after 'as', found " + describe(peek()));
    split.name = take().text;
    split.body = block("after 'split ... as " + split.name + "'");
    return {std::move(split), pos};
  }

  SplitWeighted split_weighted() {
    take();
    SplitWeighted split;
    skip_separators();
    while (accept_word("weight")) {
      Branch branch;
      branch.weight = expr();
      branch.body = block("after 'weight'");
      split.branches.push_back(std::move(branch));
      skip_separators();
    }
    if (split.branches.empty())
      fail("expected 'weight W { ... }' branches inside 'split { }', found " + describe(peek()));
    expect_punct("}", "after the last 'weight' branch (each branch is 'weight W { ... }')");
    return split;
  }

  Route route_statement() {
    take();
    Route route;
    route.from = expr();
    expect_punct("->", "in 'route FROM -> TO via @node ...'");
    route.to = expr();
    expect_word("via", "in 'route FROM -> TO via @node ...'");
    route.via.push_back(node_expr("after 'via'"));
    while (accept_punct(",") || peek().kind == Tok::node)
      route.via.push_back(node_expr("in the 'via' list"));
    return route;
  }

  Avoid avoid_statement() {
    take();
    Avoid avoid;
    do {
      LinkRef link;
      link.from = expect_node("in 'avoid @a -> @b'");
      if (accept_punct("<->"))
        link.both = true;
      else
        expect_punct("->", "in 'avoid @a -> @b' (or '<->' for both directions)");
      link.to = expect_node("in 'avoid @a -> @b'");
      avoid.links.push_back(std::move(link));
    } while (accept_punct(","));
    return avoid;
  }

  Step step_statement() {
    const Token& word = take();
    const auto pattern = pattern_from_string(word.text);
    if (!pattern)
      fail_at(word.pos,
              "unknown statement or pattern '" + word.text + "'; patterns are: " + pattern_list());
    Step s;
    s.pattern = *pattern;
    if (s.pattern == Pattern::kary) {
      if (peek().kind != Tok::number)
        fail("expected the tree's arity after 'kary' (e.g. 'kary 4 over all')");
      const Token& arity = take();
      const auto k = support::Rational::from_decimal(arity.text);
      if (!k || !k->is_integer() || k->num() < 2 || k->num() > 64)
        fail_at(arity.pos, "kary's arity must be an integer from 2 to 64");
      s.arity = static_cast<int>(k->num());
    }
    expect_word("over",
                "after the pattern '" + word.text + "' (e.g. '" + word.text + " over all')");
    s.groups = groups();
    while (true) {
      if (accept_word("by")) {
        if (s.groups.by) fail("'by' given twice");
        s.groups.by = expr();
      } else if (accept_word("where")) {
        if (s.groups.where) fail("'where' given twice");
        s.groups.where = expr();
      } else if (accept_word("reverse")) {
        s.reverse = true;
      } else {
        break;
      }
    }
    return s;
  }

  GroupSpec groups() {
    GroupSpec g;
    if (accept_word("all")) return g;
    if (accept_word("hosts")) {
      g.kind = GroupSpec::Kind::hosts;
      return g;
    }
    if (accept_word("rails")) {
      g.kind = GroupSpec::Kind::rails;
      return g;
    }
    if (accept_word("under")) {
      g.kind = GroupSpec::Kind::under;
      g.node = expect_node("after 'under'");
      return g;
    }
    if (!at_punct("["))
      fail(
          "expected groups after 'over': all, hosts, rails, under @switch, [ranks] or [[ranks], "
          "[ranks]]; found " +
          describe(peek()));
    g.kind = GroupSpec::Kind::lists;
    take();
    if (at_punct("[")) {
      do {
        expect_punct("[", "to start a group in [[...], [...]]");
        g.lists.push_back(list_items());
        expect_punct("]", "to close a group");
      } while (accept_punct(","));
    } else {
      g.lists.push_back(list_items());
    }
    expect_punct("]", "to close the list of ranks");
    return g;
  }

  std::vector<Expr> list_items() {
    std::vector<Expr> items;
    do {
      Expr item = expr();
      if (accept_punct("..")) {
        const SourcePos pos = item.pos;
        Expr last = expr();
        item = Expr::make_range(std::move(item), std::move(last), pos);
      }
      items.push_back(std::move(item));
    } while (accept_punct(","));
    return items;
  }

  // --- expressions ---------------------------------------------------------------------------
  Expr expr() {
    if (++nesting_ > kMaxNesting)
      fail("the expression is nested more than " + std::to_string(kMaxNesting) + " deep");
    Expr e = ternary();
    --nesting_;
    return e;
  }

  Expr ternary() {
    Expr cond = binary(kLoosestBinary);
    if (!at_punct("?")) return cond;
    take();
    const SourcePos pos = cond.pos;
    Expr yes = expr();
    expect_punct(":", "in 'condition ? a : b'");
    Expr no = expr();
    return Expr::make_ternary(std::move(cond), std::move(yes), std::move(no), pos);
  }

  // The operator here if it binds with `precedence` (dsl/operators.hpp).
  std::optional<Op> binary_operator_at(int precedence) const {
    if (peek().kind != Tok::punct) return std::nullopt;
    const auto op = binary_operator(peek().text);
    return op && dsl::precedence(*op) == precedence ? op : std::nullopt;
  }

  // Binary operators from the loosest precedence to the tightest, then unary ones.
  Expr binary(int precedence) {
    if (precedence > kTightestBinary) return unary();
    Expr left = binary(precedence + 1);
    while (const auto op = binary_operator_at(precedence)) {
      take();
      const SourcePos pos = left.pos;  // diagnostics about the whole expression point at its start
      Expr right = binary(precedence + 1);
      left = Expr::make_binary(*op, std::move(left), std::move(right), pos);
      // Comparisons do not chain: a < b < c is an error below.
      if (precedence == kComparisonPrecedence) return left;
    }
    return left;
  }

  Expr unary() {
    const auto op = peek().kind == Tok::punct ? unary_operator(peek().text) : std::nullopt;
    if (!op) return primary();
    const SourcePos pos = take().pos;
    if (++nesting_ > kMaxNesting) fail("the expression is nested too deep");
    Expr operand = unary();
    --nesting_;
    return Expr::make_unary(*op, std::move(operand), pos);
  }

  Expr primary() {
    const Token& t = peek();
    if (t.kind == Tok::number) {
      take();
      const auto value = support::Rational::from_decimal(t.text);
      if (!value) fail_at(t.pos, "the number '" + t.text + "' has too many digits");
      return Expr::make_number(*value, t.pos);
    }
    if (t.kind == Tok::node) {
      take();
      return Expr::make_node(t.text, t.pos);
    }
    if (t.kind == Tok::ident) {
      if (is_keyword(t.text)) fail_at(t.pos, "'" + t.text + "' is a keyword, not a value");
      take();
      return Expr::make_name(t.text, t.pos);
    }
    if (at_punct("(")) {
      const SourcePos pos = take().pos;
      std::vector<Expr> items{expr()};
      while (accept_punct(",")) items.push_back(expr());
      expect_punct(")", "to close '('");
      if (items.size() == 1) return std::move(items.front());
      return Expr::make_tuple(std::move(items), pos);
    }
    fail("expected a value (a number, a name such as local, or @node), found " + describe(t));
  }

  std::string_view text_;
  const std::string& source_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int block_depth_ = 0;  // blocks and expressions nest independently, each up to kMaxNesting
  int nesting_ = 0;      // expressions
};

}  // namespace

std::string_view to_string(Pattern pattern) {
  for (const auto& [p, name] : kPatternNames)
    if (p == pattern) return name;
  return "?";
}

std::optional<Pattern> pattern_from_string(std::string_view name) {
  for (const auto& [p, text] : kPatternNames)
    if (text == name) return p;
  return std::nullopt;
}

std::string source_line(std::string_view text, int line) {
  std::size_t start = 0;
  for (int l = 1; l < line; ++l) {
    const auto next = text.find('\n', start);
    if (next == std::string_view::npos) return {};
    start = next + 1;
  }
  const auto end = text.find('\n', start);
  return std::string(text.substr(start, end == std::string_view::npos ? text.npos : end - start));
}

std::string DslError::render() const {
  std::string out = what();
  if (source_line_.empty() || where().column <= 0) return out;
  return out + "\n" + support::format_source_excerpt(source_line_, where().column);
}

Program parse_program(std::string_view text, const std::string& source) {
  if (text.size() > kMaxProgramBytes)
    throw DslError(support::SourceLocation{source, 0, 0, {}},
                   "the program is larger than " + std::to_string(kMaxProgramBytes) + " bytes", "");
  return Parser(text, source).run();
}

}  // namespace optiflow::dsl
