// Splits DSL text into tokens (lexer.hpp).
#include "lexer.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "optiflow/dsl/operators.hpp"

namespace optiflow::dsl {
namespace {

// Punctuation other than the operators (those are in dsl/operators.hpp).
constexpr std::array<std::string_view, 14> kPunctuation{"<->", "->", "..", "{", "}", "(", ")",
                                                        "[",   "]",  ",",  ";", ":", "?", "="};
constexpr std::size_t kLongestPunctuation = 3;

bool is_punctuation(std::string_view text) {
  return is_operator(text) || std::ranges::find(kPunctuation, text) != kPunctuation.end();
}

bool is_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  std::vector<Token> run() {
    while (true) {
      skip_blanks_and_comments();
      if (at_end()) break;
      const char c = text_[i_];
      const SourcePos pos{line_, column_};
      if (c == '\n') {
        advance();
        if (depth_ == 0) push(Tok::semi, ";", pos);
      } else if (is_ident_start(c)) {
        push(Tok::ident, take_while(is_ident_char), pos);
      } else if (is_digit(c)) {
        number(pos);
      } else if (c == '@') {
        if (!node(pos))
          return fail("'@' must be followed by a node id, e.g. @h0.gpu3 or @\"gpu-0\"", pos);
      } else if (!punctuation(pos)) {
        return fail(std::string("unexpected character '") + c + "'", pos);
      }
    }
    push(Tok::semi, ";", SourcePos{line_, column_});
    push(Tok::end, "", SourcePos{line_, column_});
    return std::move(tokens_);
  }

 private:
  bool at_end() const { return i_ >= text_.size(); }

  void advance() {
    if (text_[i_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++i_;
  }

  void skip_blanks_and_comments() {
    while (!at_end()) {
      const char c = text_[i_];
      if (c == '#') {
        while (!at_end() && text_[i_] != '\n') advance();
      } else if (c == ' ' || c == '\t' || c == '\r') {
        advance();
      } else {
        return;
      }
    }
  }

  template <typename Pred>
  std::string take_while(Pred pred) {
    const std::size_t start = i_;
    while (!at_end() && pred(text_[i_])) advance();
    return std::string(text_.substr(start, i_ - start));
  }

  void number(SourcePos pos) {
    std::string digits = take_while(is_digit);
    // "0..7" is a range, not the number "0." followed by ".7".
    if (i_ + 1 < text_.size() && text_[i_] == '.' && is_digit(text_[i_ + 1])) {
      advance();
      digits += "." + take_while(is_digit);
    }
    push(Tok::number, digits, pos);
  }

  bool node(SourcePos pos) {
    advance();  // '@'
    if (!at_end() && text_[i_] == '"') {
      advance();
      std::string id;
      while (!at_end() && text_[i_] != '"' && text_[i_] != '\n') {
        id += text_[i_];
        advance();
      }
      if (at_end() || text_[i_] != '"' || id.empty()) return false;
      advance();
      push(Tok::node, id, pos);
      return true;
    }
    // A '.' belongs to the id only when an identifier character follows, so that the range
    // "@h0.gpu0..@h0.gpu7" splits at "..".
    std::string id;
    while (!at_end() && (is_ident_char(text_[i_]) || (text_[i_] == '.' && i_ + 1 < text_.size() &&
                                                      is_ident_char(text_[i_ + 1])))) {
      id += text_[i_];
      advance();
    }
    if (id.empty()) return false;
    push(Tok::node, id, pos);
    return true;
  }

  // The longest punctuation or operator here, so that "<->" wins over "<" and "<=" over "<".
  bool punctuation(SourcePos pos) {
    for (std::size_t length = kLongestPunctuation; length > 0; --length) {
      const std::string_view p = text_.substr(i_, length);
      if (p.size() != length || !is_punctuation(p)) continue;
      for (std::size_t k = 0; k < p.size(); ++k) advance();
      if (p == "(" || p == "[") ++depth_;
      if ((p == ")" || p == "]") && depth_ > 0) --depth_;
      push(p == ";" ? Tok::semi : Tok::punct, std::string(p), pos);
      return true;
    }
    return false;
  }

  void push(Tok kind, std::string text, SourcePos pos) {
    tokens_.push_back(Token{kind, std::move(text), pos});
  }

  std::vector<Token> fail(std::string message, SourcePos pos) {
    tokens_.push_back(Token{Tok::end, std::move(message), pos});
    return std::move(tokens_);
  }

  std::string_view text_;
  std::size_t i_ = 0;
  int line_ = 1, column_ = 1, depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view text) {
  return Lexer(text).run();
}

}  // namespace optiflow::dsl
