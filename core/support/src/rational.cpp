#include "optiflow/support/rational.hpp"

#include <numeric>

namespace optiflow::support {
namespace {

__extension__ typedef __int128 Wide;  // GCC and Clang: exact products of two int64

std::optional<Rational> normalised(Wide num, Wide den) {
  if (den == 0) return std::nullopt;
  if (den < 0) {
    num = -num;
    den = -den;
  }
  Wide a = num < 0 ? -num : num, b = den;
  while (b != 0) {
    const Wide t = a % b;
    a = b;
    b = t;
  }
  if (a > 1) {
    num /= a;
    den /= a;
  }
  constexpr Wide kMax = INT64_MAX;
  if (num > kMax || num < -kMax || den > kMax) return std::nullopt;
  return Rational::make(static_cast<std::int64_t>(num), static_cast<std::int64_t>(den));
}

}  // namespace

std::optional<Rational> Rational::make(std::int64_t num, std::int64_t den) {
  if (den == 0) return std::nullopt;
  if (den < 0) {
    if (num == INT64_MIN || den == INT64_MIN) return std::nullopt;
    num = -num;
    den = -den;
  }
  const std::int64_t g = std::gcd(num, den);
  Rational r;
  r.num_ = num / (g == 0 ? 1 : g);
  r.den_ = den / (g == 0 ? 1 : g);
  return r;
}

std::optional<Rational> Rational::from_decimal(const std::string& text) {
  Wide num = 0, den = 1;
  bool fraction = false;
  for (char c : text) {
    if (c == '.') {
      if (fraction) return std::nullopt;
      fraction = true;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    num = num * 10 + (c - '0');
    if (fraction) den *= 10;
    if (num > INT64_MAX || den > INT64_MAX) return std::nullopt;
  }
  return normalised(num, den);
}

std::optional<Rational> add(Rational a, Rational b) {
  return normalised(Wide(a.num_) * b.den_ + Wide(b.num_) * a.den_, Wide(a.den_) * b.den_);
}
std::optional<Rational> sub(Rational a, Rational b) {
  return normalised(Wide(a.num_) * b.den_ - Wide(b.num_) * a.den_, Wide(a.den_) * b.den_);
}
std::optional<Rational> mul(Rational a, Rational b) {
  return normalised(Wide(a.num_) * b.num_, Wide(a.den_) * b.den_);
}
std::optional<Rational> div(Rational a, Rational b) {
  return normalised(Wide(a.num_) * b.den_, Wide(a.den_) * b.num_);
}

int Rational::compare(Rational a, Rational b) {
  const Wide left = Wide(a.num_) * b.den_, right = Wide(b.num_) * a.den_;
  return left < right ? -1 : (left > right ? 1 : 0);
}

std::string Rational::to_string() const {
  if (den_ == 1) return std::to_string(num_);
  // Terminating decimals have only 2s and 5s in the denominator.
  std::int64_t d = den_;
  int twos = 0, fives = 0;
  while (d % 2 == 0) d /= 2, ++twos;
  while (d % 5 == 0) d /= 5, ++fives;
  const int digits = std::max(twos, fives);
  // Literals have at most 18 decimals (from_decimal); other fractions print as num/den.
  if (d != 1 || digits > 18) return std::to_string(num_) + "/" + std::to_string(den_);
  Wide scaled = Wide(num_ < 0 ? -num_ : num_);
  Wide scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  scaled = scaled * (scale / den_);
  const auto whole = static_cast<std::int64_t>(scaled / scale);
  std::string frac = std::to_string(static_cast<std::int64_t>(scaled % scale));
  frac.insert(0, static_cast<std::size_t>(digits) - frac.size(), '0');
  return (num_ < 0 ? "-" : "") + std::to_string(whole) + "." + frac;
}

std::optional<std::int64_t> checked_lcm(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  const Wide l = Wide(a) / std::gcd(a, b) * b;
  if (l > INT64_MAX) return std::nullopt;
  return static_cast<std::int64_t>(l);
}

}  // namespace optiflow::support
