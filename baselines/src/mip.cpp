// The baselines' MIP layer on COIN-OR: the model in CoinPackedMatrix's arrays, CBC driven through
// CbcMain0/CbcMain1 (as its command line is), CLP for the relaxation.
#include "mip.hpp"

#include <CbcEventHandler.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>

#include "optiflow/support/strings.hpp"

namespace optiflow::baselines::mip {
namespace {

constexpr double kMinSeconds = 0.01;     // the least -sec CBC is given (a limit of 0 still solves)
constexpr double kZeroObjective = 1e-9;  // an objective this small has no relative gap

std::size_t at(int i) {
  return static_cast<std::size_t>(i);
}

// Reports each new incumbent CBC finds, so that a long solve shows where it stands.
class IncumbentReporter : public CbcEventHandler {
 public:
  explicit IncumbentReporter(Progress progress) : progress_(std::move(progress)) {}
  CbcAction event(CbcEvent which) override {
    if ((which == solution || which == heuristicSolution) && model_ &&
        model_->getObjValue() != last_ && model_->getObjValue() < 1e300) {
      last_ = model_->getObjValue();
      progress_(support::strprintf("    incumbent %.4g, bound %.4g, %.1f s", model_->getObjValue(),
                                   model_->getBestPossibleObjValue(), model_->getCurrentSeconds()));
    }
    return noAction;
  }
  CbcEventHandler* clone() const override { return new IncumbentReporter(*this); }

 private:
  Progress progress_;
  double last_ = 0;
};

int no_callback(CbcModel*, int) {
  return 0;
}

void normalise(Terms& terms) {
  std::sort(terms.begin(), terms.end());
  std::size_t out = 0;
  for (std::size_t i = 0; i < terms.size();) {
    const int column = terms[i].first;
    double coef = 0;
    for (; i < terms.size() && terms[i].first == column; ++i) coef += terms[i].second;
    if (coef != 0) terms[out++] = {column, coef};
  }
  terms.resize(out);
}

// CBC's command line for `limits`; the strings outlive the solve.
std::vector<std::string> cbc_arguments(const Limits& limits) {
  std::vector<std::string> args{"optiflow-mip", "-log", "0", "-slog", "0", "-timeMode", "elapsed"};
  if (limits.settings == Settings::cbc_defaults) args.insert(args.end(), {"-preprocess", "off"});
  args.insert(args.end(), {"-sec", support::strprintf("%.3f", std::max(limits.time_s, kMinSeconds)),
                           "-ratioGap", support::strprintf("%.6g", std::max(limits.gap, 0.0))});
  if (limits.seed) args.insert(args.end(), {"-randomCbcSeed", std::to_string(*limits.seed)});
  if (limits.max_solutions)
    args.insert(args.end(), {"-maxSolutions", std::to_string(*limits.max_solutions)});
  if (limits.max_nodes) args.insert(args.end(), {"-maxNodes", std::to_string(*limits.max_nodes)});
  args.insert(args.end(), {"-solve", "-quit"});
  return args;
}

// Runs CBC on `cbc` (the model loaded, a start passed in) as its command line would.
void run_cbc(CbcModel& cbc, const Limits& limits) {
  CbcSolverUsefulData data;
  data.noPrinting_ = true;
  data.useSignalHandler_ = false;  // Ctrl-C stops the program, not the solve
  CbcMain0(cbc, data);
  // CbcMain0 fills its table with its defaults; the bare table is the one CbcMain1 would
  // start from had CbcMain0 been given another (TE-CCL's calls always were).
  if (limits.settings == Settings::bare_table) data.parameters_ = CbcSolverUsefulData().parameters_;
  cbc.setLogLevel(0);
  const std::vector<std::string> args = cbc_arguments(limits);
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  CbcMain1(static_cast<int>(argv.size()), argv.data(), cbc, no_callback, data);
}

// CBC's answer, or the start where CBC has none or a worse one.
void take_answer(const CbcModel& cbc, const Model& model, const std::vector<double>* start,
                 Solution& result) {
  const double* best = cbc.bestSolution();
  const bool solved = best != nullptr && cbc.getMinimizationObjValue() < 1e49;
  if (solved) {
    result.values.assign(best, best + model.columns());
    result.objective = cbc.getObjValue();
  }
  if (start && (!solved || model.objective_of(*start) < result.objective)) {
    result.values = *start;
    result.objective = model.objective_of(*start);
    result.from_start = !solved;
  }
  const bool found = solved || start;
  result.bound = std::min(cbc.getBestPossibleObjValue(), result.objective);
  if (found)
    result.status = cbc.isProvenOptimal() ? Status::optimal : Status::feasible;
  else
    result.status = cbc.isProvenInfeasible() ? Status::infeasible : Status::no_solution;
  result.time_limit = cbc.isSecondsLimitReached();
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

int Model::add_column(double lower, double upper, double objective, bool integer) {
  lower_.push_back(lower);
  upper_.push_back(upper);
  objective_.push_back(objective);
  integer_.push_back(integer ? 1 : 0);
  return static_cast<int>(lower_.size()) - 1;
}

void Model::add_objective(int column, double cost) {
  objective_[at(column)] += cost;
}

void Model::set_bounds(int column, double lower, double upper) {
  lower_[at(column)] = std::max(lower_[at(column)], lower);
  upper_[at(column)] = std::min(upper_[at(column)], upper);
}

void Model::add_row(const Expr& expr, double lower, double upper) {
  add_row(expr.terms, lower <= -kInf ? -kInf : lower - expr.constant,
          upper >= kInf ? kInf : upper - expr.constant);
}

void Model::add_row(Terms terms, double lower, double upper) {
  normalise(terms);
  if (terms.empty()) return;
  if (merge_identical_rows_ && !seen_.emplace(terms, std::make_pair(lower, upper)).second) return;
  row_terms_.push_back(std::move(terms));
  row_lower_.push_back(lower);
  row_upper_.push_back(upper);
}

int Model::integers() const {
  return static_cast<int>(std::count(integer_.begin(), integer_.end(), 1));
}

double Model::objective_of(const std::vector<double>& values) const {
  double total = 0;
  for (std::size_t c = 0; c < values.size(); ++c) total += objective_[c] * values[c];
  return total;
}

bool Model::feasible(const std::vector<double>& values, double tolerance) const {
  if (static_cast<int>(values.size()) != columns()) return false;
  for (std::size_t c = 0; c < values.size(); ++c)
    if (values[c] < lower_[c] - tolerance || values[c] > upper_[c] + tolerance) return false;
  for (std::size_t r = 0; r < row_terms_.size(); ++r) {
    double activity = 0;
    for (const auto& [column, coef] : row_terms_[r]) activity += coef * values[at(column)];
    const double scale = tolerance * std::max(1.0, std::abs(activity));
    if (activity < row_lower_[r] - scale || activity > row_upper_[r] + scale) return false;
  }
  return true;
}

double Model::least_value(int column, const std::vector<double>& values) const {
  double least = lower_[at(column)];
  for (std::size_t r = 0; r < row_terms_.size(); ++r) {
    double coef_here = 0, rest = 0;
    for (const auto& [c, coef] : row_terms_[r]) {
      if (c == column)
        coef_here += coef;
      else
        rest += coef * values[at(c)];
    }
    if (coef_here < 0 && row_upper_[r] < kInf)
      least = std::max(least, (rest - row_upper_[r]) / -coef_here);
  }
  return least;
}

void Model::load(OsiSolverInterface& solver, bool integers) const {
  std::vector<CoinBigIndex> starts;
  std::vector<int> lengths, indices;
  std::vector<double> elements;
  for (const Terms& terms : row_terms_) {
    starts.push_back(static_cast<CoinBigIndex>(indices.size()));
    lengths.push_back(static_cast<int>(terms.size()));
    for (const auto& [column, coef] : terms) {
      indices.push_back(column);
      elements.push_back(coef);
    }
  }
  const CoinPackedMatrix matrix(false, columns(), rows(), static_cast<CoinBigIndex>(indices.size()),
                                elements.data(), indices.data(), starts.data(), lengths.data());
  solver.loadProblem(matrix, lower_.data(), upper_.data(), objective_.data(), row_lower_.data(),
                     row_upper_.data());
  if (integers)
    for (int c = 0; c < columns(); ++c)
      if (integer_[at(c)]) solver.setInteger(c);
}

double Solution::gap() const {
  if (std::abs(objective) < kZeroObjective) return 0;
  return std::max(0.0, objective - bound) / std::abs(objective);
}

Solution solve(const Model& model, const Limits& limits, const Progress& progress,
               const std::vector<double>* start) {
  const auto begin = std::chrono::steady_clock::now();
  OsiClpSolverInterface solver;
  model.load(solver, true);
  solver.messageHandler()->setLogLevel(0);
  if (start && !model.feasible(*start)) start = nullptr;
  // CBC takes a start by column names.
  if (start)
    for (int c = 0; c < model.columns(); ++c) solver.setColName(c, "c" + std::to_string(c));
  CbcModel cbc(solver);
  if (start) {
    std::vector<std::pair<std::string, double>> named;
    for (int c = 0; c < model.columns(); ++c)
      named.emplace_back("c" + std::to_string(c), (*start)[at(c)]);
    cbc.setMIPStart(named);
    if (progress)
      progress(support::strprintf("    heuristic start %.4g", model.objective_of(*start)));
  }
  // Only with progress: with an event handler CBC resets its cutoff after each incumbent, so the
  // handler is part of how it searches (TE-CCL's solves have never had one).
  IncumbentReporter reporter(progress);
  if (progress) cbc.passInEventHandler(&reporter);
  run_cbc(cbc, limits);
  Solution result;
  take_answer(cbc, model, start, result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

Solution solve_relaxation(const Model& model, double time_s) {
  const auto begin = std::chrono::steady_clock::now();
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  model.load(solver, false);
  solver.getModelPtr()->setMaximumSeconds(time_s);
  solver.initialSolve();
  Solution result;
  if (solver.isProvenOptimal()) {
    const double* values = solver.getColSolution();
    result.values.assign(values, values + model.columns());
    result.status = Status::optimal;
    result.objective = result.bound = solver.getObjValue();
  } else {
    result.status = solver.isProvenPrimalInfeasible() ? Status::infeasible : Status::no_solution;
    result.time_limit = solver.isIterationLimitReached() || !solver.isProvenPrimalInfeasible();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

}  // namespace optiflow::baselines::mip
