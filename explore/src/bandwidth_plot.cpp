// The comparison as a picture, written as SVG text: bus bandwidth against buffer size (log
// axis), one line per contender and the lower bound dashed; below it, each contender's speed-up
// over NCCL's pick.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "optiflow/explore/compare.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::explore {
namespace {

constexpr double kWidth = 860;
constexpr double kLeft = 80, kRight = 200, kTop = 50;  // margins
constexpr double kPanelHeight = 400, kSpeedupHeight = 200, kPanelGap = 80;
constexpr double kBottom = 70;  // below the last panel: size labels and the axis title
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr const char* kDashed = "stroke=\"black\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"";

std::string fmt(const char* pattern, double a = 0, double b = 0, double c = 0, double d = 0) {
  char text[256];
  std::snprintf(text, sizeof text, pattern, a, b, c, d);
  return text;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else if (ch == '"')
      out += "&quot;";
    else
      out += ch;
  }
  return out;
}

// A round step for about `ticks` gridlines up to `top`: 1, 2 or 5 times a power of ten.
double tick_step(double top, int ticks) {
  const double raw = top / ticks;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) return m * magnitude;
  return 10 * magnitude;
}

using Points = std::vector<std::pair<std::uint64_t, double>>;

// One panel: sizes on a log axis across, values from 0 to a round top up the side.
class Panel {
 public:
  Panel(const Comparison& c, double top_px, double height_px, double highest)
      : lo_(std::log2(static_cast<double>(c.sizes.front()))),
        hi_(std::log2(static_cast<double>(c.sizes.back()))),
        top_px_(top_px),
        height_px_(height_px),
        step_(tick_step(highest * 1.05, height_px > 250 ? 6 : 4)) {
    if (hi_ <= lo_) hi_ = lo_ + 1;
    y_top_ = std::ceil(highest * 1.05 / step_) * step_;
  }
  double x(std::uint64_t size) const {
    return kLeft +
           (std::log2(static_cast<double>(size)) - lo_) / (hi_ - lo_) * (kWidth - kLeft - kRight);
  }
  double y(double value) const { return bottom() - value / y_top_ * height_px_; }
  double bottom() const { return top_px_ + height_px_; }

  // Gridlines, tick labels, the sizes (labelled as sizes are written: 1K, 32M, 1G), the frame
  // and the y axis' title.
  std::string frame(const Comparison& c, const std::string& y_title) const {
    std::string svg;
    for (double v = 0; v <= y_top_ + step_ / 2; v += step_)
      svg += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", kLeft,
                 y(v), kWidth - kRight, y(v)) +
             fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", kLeft - 6, y(v) + 4,
                 v);
    const std::size_t every = std::max<std::size_t>(1, (c.sizes.size() + 7) / 8);
    for (std::size_t s = 0; s < c.sizes.size(); s += every)
      svg +=
          fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
              x(c.sizes[s]), top_px_, x(c.sizes[s]), bottom()) +
          fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x(c.sizes[s]), bottom() + 18) +
          support::format_size(c.sizes[s]) + "</text>\n";
    svg +=
        fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"black\"/>\n",
            kLeft, top_px_, kWidth - kLeft - kRight, height_px_);
    svg += fmt("<text transform=\"translate(22,%.1f) rotate(-90)\" text-anchor=\"middle\">",
               top_px_ + height_px_ / 2) +
           escaped(y_title) + "</text>\n";
    return svg;
  }

  std::string polyline(const Points& points, const std::string& style) const {
    std::string path;
    for (const auto& [size, value] : points) path += fmt("%.1f,%.1f ", x(size), y(value));
    return "<polyline fill=\"none\" " + style + " points=\"" + path + "\"/>\n";
  }

  std::string dots(const Points& points, const std::string& colour) const {
    std::string svg;
    for (const auto& [size, value] : points)
      svg += fmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" ", x(size), y(value)) + "fill=\"" +
             colour + "\"/>\n";
    return svg;
  }

 private:
  double lo_, hi_, top_px_, height_px_, step_, y_top_ = 1;
};

std::string legend(double top_px, std::size_t row, const std::string& style,
                   const std::string& label) {
  const double y = top_px + 10 + 20 * static_cast<double>(row);
  return fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" ", kWidth - kRight + 15, y,
             kWidth - kRight + 45, y) +
         style + "/>\n" + fmt("<text x=\"%.1f\" y=\"%.1f\">", kWidth - kRight + 52, y + 4) +
         escaped(label) + "</text>\n";
}

std::string colour_of(std::size_t contender) {
  return kColours[contender % std::size(kColours)];
}

std::string line_style(std::size_t contender) {
  return "stroke=\"" + colour_of(contender) + "\" stroke-width=\"2\"";
}

// Each contender's speed-up over NCCL's pick per size, where both are known.
std::vector<Points> speedups(const Comparison& c) {
  std::vector<Points> lines(c.contenders.size());
  for (std::size_t k = 0; k < c.contenders.size(); ++k)
    for (std::size_t s = 0; s < c.contenders[k].results.size() && s < c.nccl_us.size(); ++s) {
      const support::SizeResult& p = c.contenders[k].results[s];
      if (p.time_us > 0 && c.nccl_us[s] > 0)
        lines[k].emplace_back(p.size_bytes, c.nccl_us[s] / p.time_us);
    }
  return lines;
}

}  // namespace

std::string bandwidth_plot_svg(const Comparison& c) {
  const double factor = support::busbw_factor(c.collective, c.ranks);
  Points bound;
  double highest = 0;
  for (std::size_t s = 0; s < c.sizes.size(); ++s) {
    bound.emplace_back(c.sizes[s],
                       support::GBps_of(static_cast<double>(c.sizes[s]), c.bound_us[s]) * factor);
    highest = std::max(highest, bound.back().second);
  }
  std::vector<Points> busbw(c.contenders.size());
  for (std::size_t k = 0; k < c.contenders.size(); ++k)
    for (const support::SizeResult& p : c.contenders[k].results) {
      busbw[k].emplace_back(p.size_bytes, p.busbw_GBps);
      highest = std::max(highest, p.busbw_GBps);
    }
  const std::vector<Points> over_nccl = speedups(c);
  double fastest = 1;
  for (const Points& line : over_nccl)
    for (const auto& point : line) fastest = std::max(fastest, point.second);
  const bool with_speedups = !c.nccl_us.empty();
  const double height =
      kTop + kPanelHeight + (with_speedups ? kPanelGap + kSpeedupHeight : 0) + kBottom;

  std::string svg =
      fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 "
          "%.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
          kWidth, height, kWidth, height);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", kLeft) + "\" y=\"28\" font-size=\"16\">" +
         escaped(std::string(support::to_string(c.collective)) + " on " + c.topology + ", " +
                 std::string(sim::to_string(c.model)) + " model") +
         "</text>\n";

  // Bus bandwidth: the bound dashed, then one line per contender, each with its legend entry.
  const Panel bandwidth(c, kTop, kPanelHeight, highest);
  svg += bandwidth.frame(c, "bus bandwidth (GB/s)");
  svg += bandwidth.polyline(bound, kDashed) + legend(kTop, 0, kDashed, "lower bound");
  for (std::size_t k = 0; k < c.contenders.size(); ++k)
    svg += bandwidth.dots(busbw[k], colour_of(k)) + bandwidth.polyline(busbw[k], line_style(k)) +
           legend(kTop, k + 1, line_style(k), c.contenders[k].name);

  // Speed-up over NCCL's pick, NCCL itself dashed at 1.
  double last_bottom = bandwidth.bottom();
  if (with_speedups) {
    const Panel speedup(c, bandwidth.bottom() + kPanelGap, kSpeedupHeight, fastest);
    svg += speedup.frame(c, "speed-up over NCCL");
    const Points nccl{{c.sizes.front(), 1.0}, {c.sizes.back(), 1.0}};
    svg += speedup.polyline(nccl, kDashed);
    for (std::size_t k = 0; k < c.contenders.size(); ++k)
      svg +=
          speedup.dots(over_nccl[k], colour_of(k)) + speedup.polyline(over_nccl[k], line_style(k));
    last_bottom = speedup.bottom();
  }
  svg += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (kLeft + kWidth - kRight) / 2,
             last_bottom + 48) +
         "buffer size per rank (log scale)</text>\n";
  return svg + "</svg>\n";
}

}  // namespace optiflow::explore
