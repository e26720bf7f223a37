// The comparison as a picture: bus bandwidth against buffer size (log axis), one line per
// contender and the lower bound dashed, written as SVG text.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "optiflow/explore/compare.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::explore {
namespace {

constexpr double kWidth = 860, kHeight = 520;
constexpr double kLeft = 80, kRight = 200, kTop = 50, kBottom = 70;  // margins
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

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

class Axes {
 public:
  Axes(const Comparison& c, double y_top)
      : lo_(std::log2(static_cast<double>(c.sizes.front()))),
        hi_(std::log2(static_cast<double>(c.sizes.back()))),
        y_top_(y_top) {
    if (hi_ <= lo_) hi_ = lo_ + 1;
  }
  double x(std::uint64_t size) const {
    return kLeft +
           (std::log2(static_cast<double>(size)) - lo_) / (hi_ - lo_) * (kWidth - kLeft - kRight);
  }
  double y(double value) const {
    return kHeight - kBottom - value / y_top_ * (kHeight - kTop - kBottom);
  }

 private:
  double lo_, hi_, y_top_;
};

std::string polyline(const Axes& axes, const std::vector<std::pair<std::uint64_t, double>>& points,
                     const std::string& style) {
  std::string path;
  for (const auto& [size, value] : points) path += fmt("%.1f,%.1f ", axes.x(size), axes.y(value));
  return "<polyline fill=\"none\" " + style + " points=\"" + path + "\"/>\n";
}

}  // namespace

std::string bandwidth_plot_svg(const Comparison& c) {
  const double factor = support::busbw_factor(c.collective, c.ranks);
  std::vector<std::pair<std::uint64_t, double>> bound;
  double top = 0;
  for (std::size_t s = 0; s < c.sizes.size(); ++s) {
    bound.emplace_back(c.sizes[s],
                       support::GBps_of(static_cast<double>(c.sizes[s]), c.bound_us[s]) * factor);
    top = std::max(top, bound.back().second);
  }
  for (const Contender& contender : c.contenders)
    for (const support::SizeResult& p : contender.results) top = std::max(top, p.busbw_GBps);
  const double step = tick_step(top * 1.05, 6);
  top = std::ceil(top * 1.05 / step) * step;
  const Axes axes(c, top);

  std::string svg =
      fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 "
          "%.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
          kWidth, kHeight, kWidth, kHeight);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", kLeft) + "\" y=\"28\" font-size=\"16\">" +
         escaped(std::string(support::to_string(c.collective)) + " on " + c.topology + ", " +
                 std::string(sim::to_string(c.model)) + " model") +
         "</text>\n";
  // Gridlines and tick labels.
  for (double v = 0; v <= top + step / 2; v += step)
    svg += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", kLeft,
               axes.y(v), kWidth - kRight, axes.y(v)) +
           fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", kLeft - 6,
               axes.y(v) + 4, v);
  const std::size_t every = std::max<std::size_t>(1, (c.sizes.size() + 7) / 8);
  for (std::size_t s = 0; s < c.sizes.size(); s += every)
    svg += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
               axes.x(c.sizes[s]), kTop, axes.x(c.sizes[s]), kHeight - kBottom) +
           fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", axes.x(c.sizes[s]),
               kHeight - kBottom + 18) +
           support::format_size(c.sizes[s]) + "</text>\n";
  svg +=
      fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
          "stroke=\"black\"/>\n",
          kLeft, kTop, kWidth - kLeft - kRight, kHeight - kTop - kBottom);
  svg += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (kLeft + kWidth - kRight) / 2,
             kHeight - 22) +
         "buffer size per rank (bytes, log scale)</text>\n";
  svg += fmt("<text transform=\"translate(22,%.1f) rotate(-90)\" text-anchor=\"middle\">",
             (kTop + kHeight - kBottom) / 2) +
         "bus bandwidth (GB/s)</text>\n";

  // The bound, then one line per contender, each with its legend entry.
  auto legend = [&](std::size_t row, const std::string& style, const std::string& label) {
    const double y = kTop + 10 + 20 * static_cast<double>(row);
    return fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" ", kWidth - kRight + 15, y,
               kWidth - kRight + 45, y) +
           style + "/>\n" + fmt("<text x=\"%.1f\" y=\"%.1f\">", kWidth - kRight + 52, y + 4) +
           escaped(label) + "</text>\n";
  };
  const std::string bound_style = "stroke=\"black\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"";
  svg += polyline(axes, bound, bound_style) + legend(0, bound_style, "lower bound");
  for (std::size_t k = 0; k < c.contenders.size(); ++k) {
    const std::string colour = kColours[k % std::size(kColours)];
    const std::string style = "stroke=\"" + colour + "\" stroke-width=\"2\"";
    std::vector<std::pair<std::uint64_t, double>> line;
    for (const support::SizeResult& p : c.contenders[k].results) {
      line.emplace_back(p.size_bytes, p.busbw_GBps);
      svg += fmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" ", axes.x(p.size_bytes),
                 axes.y(p.busbw_GBps)) +
             "fill=\"" + colour + "\"/>\n";
    }
    svg += polyline(axes, line, style) + legend(k + 1, style, c.contenders[k].name);
  }
  return svg + "</svg>\n";
}

}  // namespace optiflow::explore
