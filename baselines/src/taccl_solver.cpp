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
        model_->getObjValue() != last_) {
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

MipResult Mip::solve(double time_limit_s, double gap_limit,
                     const std::function<void(const std::string&)>& progress) const {
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
  CbcModel model(solver);
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
  const char* argv[] = {"optiflow-taccl", "-log",          "0",         "-timeMode",   "elapsed",
                        "-sec",           seconds.c_str(), "-ratioGap", ratio.c_str(), "-solve",
                        "-quit"};
  CbcMain1(static_cast<int>(std::size(argv)), argv, model, no_callback, data);

  MipResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double* best = model.bestSolution();
  result.has_solution = best != nullptr;
  if (result.has_solution) {
    result.values.assign(best, best + columns());
    result.objective = model.getObjValue();
    result.bound = model.getBestPossibleObjValue();
    const double denominator = std::max(std::abs(result.objective), 1e-9);
    result.gap = std::max(0.0, (result.objective - result.bound) / denominator);
  }
  if (model.isProvenOptimal() && result.has_solution) {
    result.status = *result.gap > 1e-6 ? "optimal within the gap limit" : "optimal";
  } else if (model.isProvenInfeasible()) {
    result.status = "infeasible";
  } else if (result.has_solution) {
    result.status = "feasible (time limit)";
  } else {
    result.status = "no solution (time limit)";
  }
  return result;
}

}  // namespace optiflow::baselines::taccl
