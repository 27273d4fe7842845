#include "headcount/common/plot.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "headcount/common/io.h"
#include "headcount/common/log.h"

namespace headcount::plot {

bool have_gnuplot() {
  static const bool found = std::system("command -v gnuplot >/dev/null 2>&1") == 0;
  return found;
}

std::string quote(const fs::path& p) {
  std::string out = "'";
  for (char c : p.string()) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

bool run_gnuplot(const fs::path& script) {
  if (!have_gnuplot()) {
    log::warn("gnuplot not found (apt-get install gnuplot-nox): {} not drawn", script.string());
    return false;
  }
  fs::path log_file = script;
  log_file.replace_extension(".log");
  const int rc =
      std::system(fmt::format("gnuplot {} > {} 2>&1", quote(script), quote(log_file)).c_str());
  if (rc != 0) log::warn("gnuplot failed on {}; see {}", script.string(), log_file.string());
  return rc == 0;
}

bool heatmaps(const fs::path& png, const std::string& title, const std::vector<Panel>& panels,
              const std::string& colour_label, const ColourScale& scale) {
  if (panels.empty()) return false;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& p : panels)
    for (const auto& row : p.values)
      for (double v : row)
        if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (scale.lo) lo = *scale.lo;
  if (scale.hi) hi = *scale.hi;
  if (hi <= lo) hi = lo + 1;
  fs::path base = png;
  base.replace_extension("");
  std::string gp;
  gp += fmt::format("set terminal pngcairo noenhanced size {},440 font ',10'\n",
                    360 * panels.size() + 80);
  gp += fmt::format("set output {}\n", quote(png));
  // The colour's meaning goes into the title: a colour-box label would run into the next panel.
  gp += fmt::format("set multiplot layout 1,{} title {}\n", panels.size(),
                    quote(fmt::format("{} (colour: {})", title, colour_label)));
  gp += fmt::format("set cbrange [{}:{}]\n", lo, hi);
  gp += fmt::format("set palette {}\nset datafile missing 'NaN'\n", scale.palette);
  gp += "set xlabel 'head'\nset ylabel 'layer'\nset tics out\nset xtics 1\nset ytics 1\n";
  gp += "unset key\n";
  for (size_t k = 0; k < panels.size(); ++k) {
    const auto& p = panels[k];
    size_t width = 0;
    for (const auto& row : p.values) width = std::max(width, row.size());
    const fs::path dat = fmt::format("{}_{}.dat", base.string(), k);
    std::string m;
    for (const auto& row : p.values) {
      std::vector<std::string> cells;
      for (size_t j = 0; j < width; ++j) {
        const double v = j < row.size() ? row[j] : std::nan("");
        cells.push_back(std::isnan(v) ? "NaN" : fmt::format("{:.6g}", v));
      }
      m += fmt::format("{}\n", fmt::join(cells, " "));
    }
    io::write_file_atomic(dat, m);
    gp += fmt::format("set title {}\nset xrange [-0.5:{}.5]\nset yrange [-0.5:{}.5]\n",
                      quote(p.title), width == 0 ? 0 : width - 1,
                      p.values.empty() ? 0 : p.values.size() - 1);
    gp += fmt::format("plot {} matrix with image\n", quote(dat));
  }
  gp += "unset multiplot\n";
  fs::path script = base;
  script += ".gp";
  io::write_file_atomic(script, gp);
  return run_gnuplot(script);
}

}  // namespace headcount::plot
