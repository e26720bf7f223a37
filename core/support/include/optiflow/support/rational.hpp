// Exact fractions for data splits: 0.7 and 0.3 of a shard must add up to exactly one shard.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace optiflow::support {

/// A normalised fraction num/den (den > 0, gcd 1) of 64-bit integers. Arithmetic reports
/// overflow by returning nullopt rather than wrapping, so a hostile program cannot produce
/// wrong splits.
class Rational {
 public:
  constexpr Rational() = default;
  constexpr Rational(std::int64_t integer) : num_(integer) {}  // NOLINT: implicit by design
  /// nullopt when den == 0.
  static std::optional<Rational> make(std::int64_t num, std::int64_t den);
  /// Parses a non-negative decimal literal exactly ("0.75" -> 3/4); nullopt when too precise.
  static std::optional<Rational> from_decimal(const std::string& text);

  std::int64_t num() const { return num_; }
  std::int64_t den() const { return den_; }
  bool is_integer() const { return den_ == 1; }
  double to_double() const { return static_cast<double>(num_) / static_cast<double>(den_); }

  friend std::optional<Rational> add(Rational a, Rational b);
  friend std::optional<Rational> sub(Rational a, Rational b);
  friend std::optional<Rational> mul(Rational a, Rational b);
  friend std::optional<Rational> div(Rational a, Rational b);

  bool operator==(const Rational&) const = default;
  friend bool operator<(Rational a, Rational b) { return compare(a, b) < 0; }
  friend bool operator<=(Rational a, Rational b) { return compare(a, b) <= 0; }
  friend bool operator>(Rational a, Rational b) { return compare(a, b) > 0; }
  friend bool operator>=(Rational a, Rational b) { return compare(a, b) >= 0; }

  /// Exact decimal when the fraction terminates ("0.75"), else "num/den".
  std::string to_string() const;

 private:
  static int compare(Rational a, Rational b);
  std::int64_t num_ = 0;
  std::int64_t den_ = 1;
};

std::optional<Rational> add(Rational a, Rational b);
std::optional<Rational> sub(Rational a, Rational b);
std::optional<Rational> mul(Rational a, Rational b);
std::optional<Rational> div(Rational a, Rational b);

/// Least common multiple, nullopt on overflow.
std::optional<std::int64_t> checked_lcm(std::int64_t a, std::int64_t b);

}  // namespace optiflow::support
