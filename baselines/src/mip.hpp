// The one mixed-integer layer of the synthesizer baselines (TACCL, TE-CCL): a model builder, a
// CBC solve under limits (status, objective, bound and one gap formula) and a CLP solve of the
// linear relaxation. Private to baselines/.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

class OsiSolverInterface;

namespace optiflow::baselines::mip {

/// Terms of a linear expression: (column, coefficient).
using Terms = std::vector<std::pair<int, double>>;

/// A linear expression: sum of coef * column, plus a constant.
struct Expr {
  Terms terms;
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

/// No bound: CBC and CLP read magnitudes from 1e30 on as infinite.
inline constexpr double kInf = 1e30;

/// Columns (bounds, objective coefficient, integrality) and rows lower <= terms <= upper, to be
/// minimised.
class Model {
 public:
  /// merge_identical_rows: a row equal to an earlier one (terms and bounds) is kept once
  /// (TACCL's symmetry makes many).
  explicit Model(bool merge_identical_rows = false) : merge_identical_rows_(merge_identical_rows) {}

  int add_column(double lower, double upper, double objective, bool integer);
  int add_binary(double objective = 0) { return add_column(0, 1, objective, true); }
  /// Adds `cost` to the column's objective coefficient.
  void add_objective(int column, double cost);
  /// Narrows the column's bounds to [lower, upper] (e.g. fixing a binary).
  void set_bounds(int column, double lower, double upper);

  /// lower <= expr <= upper (the expression's constant moves to the bounds). Repeated columns
  /// are summed; a row without terms is dropped (the callers only build satisfiable ones).
  void add_row(const Expr& expr, double lower, double upper);
  void add_row(Terms terms, double lower, double upper);
  void less_equal(const Expr& a, const Expr& b) { add_row(a - b, -kInf, 0); }
  void equal(const Expr& a, const Expr& b) { add_row(a - b, 0, 0); }

  int columns() const { return static_cast<int>(lower_.size()); }
  int rows() const { return static_cast<int>(row_lower_.size()); }
  int integers() const;

  /// Whether `values` (one per column) meets every bound and row within `tolerance`.
  bool feasible(const std::vector<double>& values, double tolerance = 1e-6) const;
  /// The least value of `column` that meets every row in which it appears with a negative
  /// coefficient on the <= side (e.g. a makespan bounding other terms), the others as given.
  double least_value(int column, const std::vector<double>& values) const;
  double objective_of(const std::vector<double>& values) const;

  /// Loads the model into `solver`, its integer columns marked as such if `integers`.
  void load(OsiSolverInterface& solver, bool integers) const;

 private:
  bool merge_identical_rows_;
  std::vector<double> lower_, upper_, objective_;
  std::vector<char> integer_;
  std::vector<Terms> row_terms_;
  std::vector<double> row_lower_, row_upper_;
  std::set<std::pair<Terms, std::pair<double, double>>> seen_;
};

/// Which of CBC's parameter tables a solve starts from. TACCL and TE-CCL have always run CBC
/// differently and their schedules depend on it, so both are kept (docs/baselines.md).
enum class Settings {
  /// CbcMain0's: cuts, the rounding, greedy and feasibility-pump heuristics, "fewest" nodes,
  /// no integer preprocessing: CBC 2.10.8 can crash in CglPreProcess::postProcess when its
  /// time runs out during it (TACCL's routing MILP on a varied a100x4, 9,304 binaries, at 10
  /// and 20 s); on a100x4 TACCL's schedules are the same without it, and found 3x sooner.
  cbc_defaults,
  /// The table CbcMain1 builds by itself (heuristics off); preprocessing always on.
  bare_table,
};

/// What bounds one CBC solve.
struct Limits {
  double time_s = 600;               ///< wall-clock seconds (CBC's -sec, in elapsed time)
  double gap = 0;                    ///< stop once the relative gap is below this (CBC's ratioGap)
  std::optional<int> seed;           ///< CBC's random seed; unset: CBC's own
  std::optional<int> max_solutions;  ///< stop at this many solutions
  /// Stop after this many branch-and-bound nodes (CBC's maxNodes): unlike time, a limit whose
  /// answer does not depend on the machine or its load.
  std::optional<int> max_nodes;
  Settings settings = Settings::cbc_defaults;
};

enum class Status {
  optimal,      ///< proven, or within Limits::gap
  feasible,     ///< a solution, not proven optimal (time or solution limit)
  infeasible,   ///< proven to have none
  no_solution,  ///< none found, none proven impossible (time limit)
};

/// What one solve did.
struct Solution {
  Status status = Status::no_solution;
  bool time_limit = false;     ///< the solver stopped at its time limit
  bool from_start = false;     ///< CBC found no solution: the answer is solve()'s start
  std::vector<double> values;  ///< per column, when found()
  double objective = 0;        ///< when found()
  double bound = 0;            ///< when found(): the best bound proven, at most `objective`
  double seconds = 0;          ///< wall clock of the solve, model loading included
  bool found() const { return status == Status::optimal || status == Status::feasible; }
  /// (objective - bound) / |objective|, 0 when the objective is 0 (nothing to measure it by).
  double gap() const;
};

/// Gets a line per new incumbent ("    incumbent ..., bound ..., ... s").
using Progress = std::function<void(const std::string&)>;

/// Solves with CBC. A feasible `start` is CBC's first incumbent, and the answer when CBC finds
/// nothing better. Progress, when given, watches CBC's incumbents (an event handler).
Solution solve(const Model& model, const Limits& limits, const Progress& progress = {},
               const std::vector<double>* start = nullptr);

/// Solves the linear relaxation with CLP, stopping after `time_s` seconds.
Solution solve_relaxation(const Model& model, double time_s);

}  // namespace optiflow::baselines::mip
