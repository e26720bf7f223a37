// A small mixed-integer model on COIN-OR CBC for the TACCL baseline: columns, rows of linear
// terms, and one solve with a time limit that keeps the best solution found and reports its gap.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace optiflow::baselines::taccl {

/// A linear expression: sum of coef * column, plus a constant.
struct Expr {
  std::vector<std::pair<int, double>> terms;
  double constant = 0;

  Expr() = default;
  Expr(double c) : constant(c) {}  // NOLINT: a number is an expression
  static Expr var(int column, double coef = 1) {
    Expr e;
    e.terms.emplace_back(column, coef);
    return e;
  }
  Expr& operator+=(const Expr& other);
  Expr& operator-=(const Expr& other);
  Expr& operator*=(double factor);
  friend Expr operator+(Expr a, const Expr& b) { return a += b; }
  friend Expr operator-(Expr a, const Expr& b) { return a -= b; }
  friend Expr operator*(double f, Expr a) { return a *= f; }
};

/// What one solve did.
struct MipResult {
  bool has_solution = false;
  std::vector<double> values;  ///< per column, when has_solution
  double objective = 0;
  double bound = 0;
  std::string
      status;  ///< "optimal", "feasible (time limit)", "infeasible", "no solution (time limit)"
  std::optional<double> gap;
  double seconds = 0;
};

class Mip {
 public:
  int add_column(double lower, double upper, double objective, bool integer);
  int add_binary(double objective = 0) { return add_column(0, 1, objective, true); }
  /// lower <= expr <= upper (the expression's constant moves to the bounds). Identical rows are
  /// kept once: symmetry makes many.
  void add_row(const Expr& expr, double lower, double upper);
  void less_equal(const Expr& a, const Expr& b) { add_row(a - b, -kInf, 0); }
  void equal(const Expr& a, const Expr& b) { add_row(a - b, 0, 0); }
  /// Column bounds, e.g. fixing a binary.
  void set_bounds(int column, double lower, double upper);

  int columns() const { return static_cast<int>(lower_.size()); }
  int rows() const { return static_cast<int>(row_lower_.size()); }
  int integers() const;

  /// Whether `values` (one per column) meets every bound and row within `tolerance`.
  bool feasible(const std::vector<double>& values, double tolerance = 1e-6) const;
  /// The least value of `column` that meets every row in which it appears with a negative
  /// coefficient on the <= side (e.g. a makespan bounding other terms), the others as given.
  double least_value(int column, const std::vector<double>& values) const;

  /// Solves with CBC's default cuts and heuristics; `progress` gets a line per new incumbent.
  /// A feasible `start` is CBC's first incumbent, and the answer when CBC finds none in time.
  MipResult solve(double time_limit_s, double gap_limit,
                  const std::function<void(const std::string&)>& progress,
                  const std::vector<double>* start = nullptr) const;

  static constexpr double kInf = 1e30;

 private:
  double objective_of(const std::vector<double>& values) const;

  std::vector<double> lower_, upper_, objective_;
  std::vector<char> integer_;
  std::vector<std::vector<std::pair<int, double>>> row_terms_;
  std::vector<double> row_lower_, row_upper_;
  std::set<std::pair<std::vector<std::pair<int, double>>, std::pair<double, double>>> seen_;
};

}  // namespace optiflow::baselines::taccl
