// Figures through gnuplot (Debian's gnuplot-nox): scripts and data are written beside the image,
// so a figure can be restyled and redrawn by hand. Without gnuplot, a warning and no image.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace headcount::plot {

namespace fs = std::filesystem;

bool have_gnuplot();

// Runs `script` (a .gp file); false (with a warning naming its log) when gnuplot fails.
bool run_gnuplot(const fs::path& script);

// Quotes a path for a gnuplot script.
std::string quote(const fs::path& p);

// One panel of a heat map: rows are layers (drawn bottom-up), columns heads. NaN: no value.
struct Panel {
  std::string title;
  std::vector<std::vector<double>> values;
};

// The colour scale of a heat map: gnuplot's `set palette` arguments and the range (default: the
// values' own range).
struct ColourScale {
  std::string palette = "rgbformulae 30,31,32";
  std::optional<double> lo, hi;
};

// Side-by-side heat maps with one colour scale, written to `png` (with .gp and .dat beside it).
// Returns false when no image was made.
bool heatmaps(const fs::path& png, const std::string& title, const std::vector<Panel>& panels,
              const std::string& colour_label, const ColourScale& scale = {});

}  // namespace headcount::plot
