#include "taccl_solver.hpp"

#include <CbcEventHandler.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>

#include "optiflow/support/strings.hpp"

namespace optiflow::baselines::taccl {
namespace {

// Reports each new incumbent CBC finds, so that a long solve shows where it stands.
class IncumbentReporter : public CbcEventHandler {
 public:
  explicit IncumbentReporter(std::function<void(const std::string&)> progress)
      : progress_(std::move(progress)) {}
  CbcAction event(CbcEvent which) override {
    if ((which == solution || which == heuristicSolution) && progress_ && model_ &&
        model_->getObjValue() != last_ && model_->getObjValue() < 1e300) {
      last_ = model_->getObjValue();
      progress_(support::strprintf("    incumbent %.4g, bound %.4g, %.1f s", model_->getObjValue(),
                                   model_->getBestPossibleObjValue(), model_->getCurrentSeconds()));
    }
    return noAction;
  }
  CbcEventHandler* clone() const override { return new IncumbentReporter(*this); }

 private:
  std::function<void(const std::string&)> progress_;
  double last_ = 0;
};

constexpr double kPreprocessMinSeconds = 10;  // below it, CBC runs without preprocessing

int no_callback(CbcModel*, int) {
  return 0;
}

void normalise(std::vector<std::pair<int, double>>& terms) {
  std::sort(terms.begin(), terms.end());
  std::size_t out = 0;
  for (std::size_t i = 0; i < terms.size();) {
    int column = terms[i].first;
    double coef = 0;
    for (; i < terms.size() && terms[i].first == column; ++i) coef += terms[i].second;
    if (coef != 0) terms[out++] = {column, coef};
  }
  terms.resize(out);
}

}  // namespace

Expr& Expr::operator+=(const Expr& other) {
  terms.insert(terms.end(), other.terms.begin(), other.terms.end());
  constant += other.constant;
  return *this;
}

Expr& Expr::operator-=(const Expr& other) {
  for (const auto& [column, coef] : other.terms) terms.emplace_back(column, -coef);
  constant -= other.constant;
  return *this;
}

Expr& Expr::operator*=(double factor) {
  for (auto& term : terms) term.second *= factor;
  constant *= factor;
  return *this;
}

int Mip::add_column(double lower, double upper, double objective, bool integer) {
  lower_.push_back(lower);
  upper_.push_back(upper);
  objective_.push_back(objective);
  integer_.push_back(integer ? 1 : 0);
  return static_cast<int>(lower_.size()) - 1;
}

void Mip::add_row(const Expr& expr, double lower, double upper) {
  std::vector<std::pair<int, double>> terms = expr.terms;
  normalise(terms);
  const double lo = lower <= -kInf ? -kInf : lower - expr.constant;
  const double hi = upper >= kInf ? kInf : upper - expr.constant;
  if (terms.empty()) return;  // constant rows: the callers only build satisfiable ones
  if (!seen_.emplace(terms, std::make_pair(lo, hi)).second) return;
  row_terms_.push_back(std::move(terms));
  row_lower_.push_back(lo);
  row_upper_.push_back(hi);
}

void Mip::set_bounds(int column, double lower, double upper) {
  lower_[static_cast<std::size_t>(column)] =
      std::max(lower_[static_cast<std::size_t>(column)], lower);
  upper_[static_cast<std::size_t>(column)] =
      std::min(upper_[static_cast<std::size_t>(column)], upper);
}

int Mip::integers() const {
  return static_cast<int>(std::count(integer_.begin(), integer_.end(), 1));
}

double Mip::objective_of(const std::vector<double>& values) const {
  double total = 0;
  for (std::size_t c = 0; c < values.size(); ++c) total += objective_[c] * values[c];
  return total;
}

bool Mip::feasible(const std::vector<double>& values, double tolerance) const {
  if (static_cast<int>(values.size()) != columns()) return false;
  for (std::size_t c = 0; c < values.size(); ++c)
    if (values[c] < lower_[c] - tolerance || values[c] > upper_[c] + tolerance) return false;
  for (std::size_t r = 0; r < row_terms_.size(); ++r) {
    double activity = 0;
    for (const auto& [column, coef] : row_terms_[r])
      activity += coef * values[static_cast<std::size_t>(column)];
    const double scale = tolerance * std::max(1.0, std::abs(activity));
    if (activity < row_lower_[r] - scale || activity > row_upper_[r] + scale) return false;
  }
  return true;
}

double Mip::least_value(int column, const std::vector<double>& values) const {
  double least = lower_[static_cast<std::size_t>(column)];
  for (std::size_t r = 0; r < row_terms_.size(); ++r) {
    double coef_here = 0, rest = 0;
    for (const auto& [c, coef] : row_terms_[r]) {
      if (c == column)
        coef_here += coef;
      else
        rest += coef * values[static_cast<std::size_t>(c)];
    }
    if (coef_here < 0 && row_upper_[r] < kInf)
      least = std::max(least, (rest - row_upper_[r]) / -coef_here);
  }
  return least;
}

MipResult Mip::solve(double time_limit_s, double gap_limit,
                     const std::function<void(const std::string&)>& progress,
                     const std::vector<double>* start) const {
  const auto begin = std::chrono::steady_clock::now();
  CoinPackedMatrix matrix(false, 0, 0);
  matrix.setDimensions(0, columns());
  for (const auto& terms : row_terms_) {
    std::vector<int> index;
    std::vector<double> value;
    for (const auto& [column, coef] : terms) {
      index.push_back(column);
      value.push_back(coef);
    }
    matrix.appendRow(static_cast<int>(index.size()), index.data(), value.data());
  }
  OsiClpSolverInterface solver;
  solver.loadProblem(matrix, lower_.data(), upper_.data(), objective_.data(), row_lower_.data(),
                     row_upper_.data());
  for (int c = 0; c < columns(); ++c)
    if (integer_[static_cast<std::size_t>(c)]) solver.setInteger(c);
  solver.messageHandler()->setLogLevel(0);
  const bool use_start = start && feasible(*start);
  if (use_start)
    for (int c = 0; c < columns(); ++c) solver.setColName(c, "c" + std::to_string(c));
  CbcModel model(solver);
  if (use_start) {
    std::vector<std::pair<std::string, double>> named;
    for (int c = 0; c < columns(); ++c)
      named.emplace_back("c" + std::to_string(c), (*start)[static_cast<std::size_t>(c)]);
    model.setMIPStart(named);
    if (progress) progress(support::strprintf("    heuristic start %.4g", objective_of(*start)));
  }
  IncumbentReporter reporter(progress);
  model.passInEventHandler(&reporter);
  CbcSolverUsefulData data;
  data.noPrinting_ = true;
  data.useSignalHandler_ = false;
  CbcMain0(model, data);
  model.setLogLevel(0);
  const std::string seconds = support::strprintf("%.3f", std::max(time_limit_s, 0.01));
  const std::string ratio = support::strprintf("%.6g", std::max(gap_limit, 0.0));
  // Wall-clock seconds, as the option says (CBC counts CPU seconds unless told otherwise).
  // CBC 2.10.8 can crash in CglPreProcess::postProcess when its time runs out during the
  // preprocessing, which a short limit makes likely: short solves go without it.
  const char* preprocess = time_limit_s < kPreprocessMinSeconds ? "off" : "sos";
  const char* argv[] = {"optiflow-taccl", "-log",     "0",    "-timeMode",     "elapsed",
                        "-preprocess",    preprocess, "-sec", seconds.c_str(), "-ratioGap",
                        ratio.c_str(),    "-solve",   "-quit"};
  CbcMain1(static_cast<int>(std::size(argv)), argv, model, no_callback, data);

  MipResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double* best = model.bestSolution();
  result.has_solution = best != nullptr || use_start;
  if (result.has_solution) {
    if (best) {
      result.values.assign(best, best + columns());
      result.objective = model.getObjValue();
    }
    if (use_start && (!best || objective_of(*start) < result.objective)) {
      result.values = *start;
      result.objective = objective_of(*start);
    }
    result.bound = std::min(model.getBestPossibleObjValue(), result.objective);
    const double denominator = std::max(std::abs(result.objective), 1e-9);
    result.gap = std::max(0.0, (result.objective - result.bound) / denominator);
  }
  if (model.isProvenOptimal() && result.has_solution) {
    result.status = *result.gap > 1e-6 ? "optimal within the gap limit" : "optimal";
  } else if (model.isProvenInfeasible() && !use_start) {  // a feasible start disproves it
    result.status = "infeasible";
  } else if (result.has_solution) {
    result.status = best ? "feasible (time limit)" : "feasible (time limit; the heuristic start)";
  } else {
    result.status = "no solution (time limit)";
  }
  return result;
}

}  // namespace optiflow::baselines::taccl
