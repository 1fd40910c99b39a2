// Internal to app/: a small SVG line-plot frame (axes, ticks, legend, polylines) shared by
// the simulator's plots and the run reports of the embedded cluster and `launch`.
#pragma once

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gwtf::app::plot {

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A round axis maximum for `v`.
inline double nice_max(double v) {
  if (!(v > 0))
    return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= v)
      return m * p;
  return 10 * p;
}

// A plot frame: margins, axes with 5 ticks each, labels, and a legend.
struct frame {
  double w = 860, h = 420, left = 70, right = 150, top = 40, bottom = 60;
  double xmax = 1, ymax = 1;
  std::ostringstream svg;

  double x(double v) const { return left + (w - left - right) * v / xmax; }
  double y(double v) const { return h - bottom - (h - top - bottom) * v / ymax; }

  void open(const std::string& title, const std::string& xlabel, const std::string& ylabel) {
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
        << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << w / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(title)
        << "</text>\n";
    for (int i = 0; i <= 5; ++i) {
      double xv = xmax * i / 5, yv = ymax * i / 5;
      svg << "<line x1=\"" << x(xv) << "\" y1=\"" << y(0) << "\" x2=\"" << x(xv) << "\" y2=\"" << y(ymax)
          << "\" stroke=\"#eee\"/>\n"
          << "<text x=\"" << x(xv) << "\" y=\"" << y(0) + 16 << "\" text-anchor=\"middle\">" << fmt("%g", xv)
          << "</text>\n"
          << "<line x1=\"" << x(0) << "\" y1=\"" << y(yv) << "\" x2=\"" << x(xmax) << "\" y2=\"" << y(yv)
          << "\" stroke=\"#eee\"/>\n"
          << "<text x=\"" << x(0) - 6 << "\" y=\"" << y(yv) + 4 << "\" text-anchor=\"end\">" << fmt("%g", yv)
          << "</text>\n";
    }
    svg << "<line x1=\"" << x(0) << "\" y1=\"" << y(0) << "\" x2=\"" << x(xmax) << "\" y2=\"" << y(0)
        << "\" stroke=\"black\"/>\n"
        << "<line x1=\"" << x(0) << "\" y1=\"" << y(0) << "\" x2=\"" << x(0) << "\" y2=\"" << y(ymax)
        << "\" stroke=\"black\"/>\n"
        << "<text x=\"" << (x(0) + x(xmax)) / 2 << "\" y=\"" << h - 22 << "\" text-anchor=\"middle\">"
        << xml_escape(xlabel) << "</text>\n"
        << "<text transform=\"translate(18," << (y(0) + y(ymax)) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
        << xml_escape(ylabel) << "</text>\n";
  }

  void legend(std::size_t row, const std::string& text, const char* stroke) {
    double lx = w - right + 15, ly = top + 10 + 20 * static_cast<double>(row);
    svg << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 22 << "\" y2=\"" << ly << "\" stroke=\""
        << stroke << "\" stroke-width=\"2\"/>\n<text x=\"" << lx + 28 << "\" y=\"" << ly + 4 << "\">" << xml_escape(text) << "</text>\n";
  }

  void polyline(const std::vector<std::pair<double, double>>& pts, const char* stroke) {
    svg << "<polyline fill=\"none\" stroke=\"" << stroke << "\" stroke-width=\"2\" points=\"";
    for (auto& [a, b] : pts)
      svg << fmt("%.1f", x(a)) << "," << fmt("%.1f", y(b)) << " ";
    svg << "\"/>\n";
  }

  std::string close() {
    svg << "</svg>\n";
    return svg.str();
  }
};

} // namespace gwtf::app::plot
