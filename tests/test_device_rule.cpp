// The device rule (issue #40): in the code that decodes, evaluates, prunes, exports and analyses,
// a tensor factory says where its tensor lives (a device, or a tensor's options) or carries a
// `// device: cpu (reason)` marker. On a GPU, a tensor made without one lands on the CPU and
// meets the model's tensors in index_select, masked_fill or an addition: our machines have no GPU,
// so this textual check stands in for running there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace headcount {
namespace {

namespace fs = std::filesystem;

struct Violation {
  std::string file;
  int line = 0;      // 1-based, where the call starts
  std::string call;  // the call's text, whitespace collapsed
};

bool is_ident(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// A quote between two digits of a number (1'000) is no character literal.
bool digit_separator(const std::string& src, size_t i) {
  return i > 0 && i + 1 < src.size() && std::isxdigit(static_cast<unsigned char>(src[i - 1])) &&
         is_ident(src[i + 1]);
}

// `src` with comments and string and character literals replaced by spaces; newlines are kept,
// so offsets map to the same lines.
std::string blank_comments_and_literals(const std::string& src) {
  std::string out = src;
  const size_t n = src.size();
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < n; ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  size_t i = 0;
  while (i < n) {
    const char c = src[i];
    if (c == '/' && i + 1 < n && src[i + 1] == '/') {
      const size_t end = src.find('\n', i);
      const size_t stop = end == std::string::npos ? n : end;
      blank(i, stop);
      i = stop;
    } else if (c == '/' && i + 1 < n && src[i + 1] == '*') {
      const size_t end = src.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? n : end + 2;
      blank(i, stop);
      i = stop;
    } else if (c == 'R' && i + 1 < n && src[i + 1] == '"' &&
               (i == 0 || !is_ident(src[i - 1]) || src[i - 1] == '8' || src[i - 1] == 'u' ||
                src[i - 1] == 'U' || src[i - 1] == 'L')) {
      // Raw string R"delim( ... )delim".
      const size_t open = src.find('(', i + 2);
      if (open == std::string::npos) break;
      const std::string close = ")" + src.substr(i + 2, open - (i + 2)) + "\"";
      const size_t end = src.find(close, open + 1);
      const size_t stop = end == std::string::npos ? n : end + close.size();
      blank(i, stop);
      i = stop;
    } else if (c == '"' || (c == '\'' && !digit_separator(src, i))) {
      // A string or character literal (a quote between digits is a digit separator: 1'000).
      size_t k = i + 1;
      while (k < n && src[k] != c && src[k] != '\n') k += src[k] == '\\' ? 2 : 1;
      const size_t stop = std::min(n, k + 1);
      blank(i, stop);
      i = stop;
    } else {
      ++i;
    }
  }
  return out;
}

// The offset just past the parenthesis that closes the one at `open`, or npos.
size_t matching_paren(const std::string& code, size_t open) {
  int depth = 0;
  for (size_t k = open; k < code.size(); ++k) {
    if (code[k] == '(') ++depth;
    if (code[k] == ')' && --depth == 0) return k + 1;
  }
  return std::string::npos;
}

// Arguments that place the tensor: a device (`device`, `st.device`, `torch::Device(...)`,
// `dev`, `kCUDA`) or another tensor's options (`x.options()`, which include its device).
bool places_tensor(const std::string& args) {
  static const std::regex kPlaced(R"((device|Device|\bdev\b|kCUDA|(\.|->)\s*options\s*\())");
  return std::regex_search(args, kPlaced);
}

// A marker with a reason: `// device: cpu (why)`.
bool has_marker(const std::string& line) {
  static const std::regex kMarker(R"((//|/\*).*\bdevice:\s*cpu\s*\(\s*[^)\s])");
  return std::regex_search(line, kMarker);
}

int line_of(const std::string& text, size_t offset) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + offset, '\n'));
}

// Every tensor factory call in `text` that neither places its tensor (in its arguments or in a
// `.to(...)` chained onto it) nor carries a marker on its first line, the line above it or any
// line it spans.
std::vector<Violation> scan_source(const std::string& text, const std::string& file) {
  static const std::regex kFactory(
      R"(\b(torch|at)\s*::\s*(zeros|ones|full|empty|empty_strided|arange|range|linspace|logspace|eye|tensor|scalar_tensor|from_blob|rand|randn|randint|randperm)\s*\()");
  const std::string code = blank_comments_and_literals(text);
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  std::vector<Violation> out;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), kFactory);
       it != std::sregex_iterator(); ++it) {
    const size_t start = static_cast<size_t>(it->position(0));
    if (start > 0 && code[start - 1] == ':') continue;  // c10::torch::..., not ours
    const size_t open = start + static_cast<size_t>(it->length(0)) - 1;
    size_t end = matching_paren(code, open);
    if (end == std::string::npos) end = code.size();
    bool placed = places_tensor(code.substr(open, end - open));
    // A chain such as torch::tensor(v, torch::kInt64).to(x.device()).view(...).
    size_t k = end;
    while (!placed) {
      while (k < code.size() && std::isspace(static_cast<unsigned char>(code[k]))) ++k;
      size_t name_at = 0;
      if (code.compare(k, 1, ".") == 0) {
        name_at = k + 1;
      } else if (code.compare(k, 2, "->") == 0) {
        name_at = k + 2;
      } else {
        break;
      }
      while (name_at < code.size() && std::isspace(static_cast<unsigned char>(code[name_at])))
        ++name_at;
      size_t name_end = name_at;
      while (name_end < code.size() && is_ident(code[name_end])) ++name_end;
      size_t paren = name_end;
      while (paren < code.size() && std::isspace(static_cast<unsigned char>(code[paren]))) ++paren;
      if (name_end == name_at || paren >= code.size() || code[paren] != '(') break;
      const size_t close = matching_paren(code, paren);
      if (close == std::string::npos) break;
      if (code.substr(name_at, name_end - name_at) == "to")
        placed = places_tensor(code.substr(paren, close - paren));
      k = close;
      end = close;
    }
    if (placed) continue;
    const int first = line_of(code, start), last = line_of(code, end);
    bool marked = false;
    for (int l = std::max(1, first - 1); l <= last && l <= static_cast<int>(lines.size()); ++l)
      marked = marked || has_marker(lines[static_cast<size_t>(l - 1)]);
    if (marked) continue;
    std::string call;
    for (char c : code.substr(start, end - start)) {
      const bool space = std::isspace(static_cast<unsigned char>(c));
      if (!(space && (call.empty() || call.back() == ' '))) call += space ? ' ' : c;
    }
    out.push_back({file, first, call});
  }
  return out;
}

std::string describe(const std::vector<Violation>& v) {
  std::string s;
  for (const auto& x : v) s += x.file + ":" + std::to_string(x.line) + ": " + x.call + "\n";
  return s;
}

std::vector<int> lines_of(const std::vector<Violation>& v) {
  std::vector<int> out;
  for (const auto& x : v) out.push_back(x.line);
  return out;
}

TEST(DeviceRule, FlagsAFactoryWithoutADevice) {
  const auto v = scan_source(
      "auto a = torch::zeros({3});\n"
      "auto b = at::arange(5, torch::kInt64);\n"
      "auto c = torch::full({2, 2},\n"
      "                     -1.0,\n"
      "                     torch::TensorOptions().dtype(torch::kDouble));\n"
      "auto d = torch::tensor(v, torch::kInt64).to(torch::kFloat32);\n"
      "auto e = torch :: ones ({1});\n",
      "snippet.cpp");
  EXPECT_EQ(lines_of(v), (std::vector<int>{1, 2, 3, 6, 7})) << describe(v);
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].file, "snippet.cpp");
  EXPECT_EQ(v[2].call, "torch::full({2, 2}, -1.0, torch::TensorOptions().dtype(torch::kDouble))");
}

TEST(DeviceRule, AcceptsADeviceOrAnotherTensorsOptions) {
  const auto v = scan_source(
      "auto a = torch::zeros({3}, x.options());\n"
      "auto b = torch::ones({2}, torch::TensorOptions().device(device).requires_grad(true));\n"
      "auto c = torch::full({2}, 1.0, st.device);\n"
      "auto d = torch::empty({n},\n"
      "                      logits->options().dtype(torch::kFloat32));\n"
      "auto e = torch::tensor(rows, torch::kInt64).to(last.device());\n"
      "auto f = torch::arange(n, torch::kInt64)\n"
      "             .view({1, n})\n"
      "             .to(enc.memory.device());\n"
      "auto g = torch::eye(T, h.options()).unsqueeze(-1);\n"
      "auto h = torch::zeros_like(x) + torch::ones_like(x) + x.new_zeros({2});\n",
      "snippet.cpp");
  EXPECT_TRUE(v.empty()) << describe(v);
}

TEST(DeviceRule, AcceptsAMarkedCpuTensorWithAReason) {
  const auto v = scan_source(
      "auto a = torch::zeros({3});  // device: cpu (host-side bookkeeping)\n"
      "// device: cpu (read through an accessor)\n"
      "auto b = torch::zeros({3});\n"
      "auto c = torch::full({2},\n"
      "                     1.0);  // device: cpu (filled on the host, moved once)\n"
      "\n"
      "auto d = torch::zeros({3});  // device: cpu\n"
      "auto e = torch::zeros({3});  // device: cpu ()\n"
      "// device: cpu (two lines above does not count)\n"
      "\n"
      "auto f = torch::zeros({3});\n"
      "auto g = torch::zeros({3});\n"
      "// device: cpu (the line below does not count)\n",
      "snippet.cpp");
  EXPECT_EQ(lines_of(v), (std::vector<int>{7, 8, 11, 12})) << describe(v);
}

TEST(DeviceRule, IgnoresCommentsAndLiterals) {
  const auto v = scan_source(
      "// torch::zeros({3}) in a comment\n"
      "/* torch::ones({2})\n"
      "   torch::rand({2}) */\n"
      "log(\"torch::zeros({3}) in a string\");\n"
      "auto r = R\"x(torch::zeros({3}) \")x\";\n"
      "auto a = torch::tensor({1}, x.options()); f(')'); g(1'000);\n"
      "torch::Tensor t;\n"
      "auto b = torch::zeros({3} /* device */);\n"
      "auto c = torch::zeros({3}, \"device\");\n",
      "snippet.cpp");
  EXPECT_EQ(lines_of(v), (std::vector<int>{8, 9})) << describe(v);
}

// The sources that make tensors for a model that may be on the GPU.
std::vector<fs::path> scanned_files() {
  const fs::path root = testing::source_dir();
  std::vector<fs::path> files;
  for (const char* module : {"decode", "eval", "prune", "analysis", "sweep", "model"}) {
    for (const fs::path& dir : {root / "src" / module, root / "include" / "headcount" / module}) {
      if (!fs::is_directory(dir)) continue;
      for (const auto& e : fs::recursive_directory_iterator(dir)) {
        const auto ext = e.path().extension();
        if (e.is_regular_file() && (ext == ".cpp" || ext == ".h")) files.push_back(e.path());
      }
    }
  }
  for (const auto& e : fs::directory_iterator(root / "src" / "cli")) {
    const std::string name = e.path().filename().string();
    if (name == "cmd_translate.cpp" || name == "cmd_analyze.cpp" || name.rfind("cmd_eval", 0) == 0)
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(DeviceRule, SourcesPlaceEveryTensorOnTheModelsDevice) {
  const auto files = scanned_files();
  // A wrong source directory would pass vacuously.
  ASSERT_GE(files.size(), 20u) << "under " << testing::source_dir().string();
  std::vector<Violation> all;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    ASSERT_TRUE(in) << f.string();
    std::stringstream text;
    text << in.rdbuf();
    const auto rel = fs::relative(f, testing::source_dir()).generic_string();
    for (auto& v : scan_source(text.str(), rel)) all.push_back(std::move(v));
  }
  EXPECT_TRUE(all.empty())
      << "tensor factories without a device: give them one (x.options(), "
         "torch::TensorOptions().device(...), or .to(device)), or, where the CPU is meant, a "
         "`// device: cpu (reason)` comment on the line or the line above:\n"
      << describe(all);
}

// The build rule of the official LibTorch (issue #40): its include folder ships an fmt (11 and
// later) in which fmt::join lives in <fmt/ranges.h> alone, so a file that uses it without that
// include compiles against Debian's fmt 9 here and fails only on a GPU machine.
TEST(BuildRule, EveryFmtJoinUserIncludesFmtRanges) {
  std::vector<std::string> missing;
  int users = 0;
  for (const char* top : {"src", "include", "tests"}) {
    for (const auto& e : fs::recursive_directory_iterator(testing::source_dir() / top)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      const std::string src = text.str();
      if (src.find(std::string("fmt::") + "join(") == std::string::npos) continue;
      ++users;
      if (src.find("#include <fmt/ranges.h>") == std::string::npos)
        missing.push_back(fs::relative(e.path(), testing::source_dir()).generic_string());
    }
  }
  EXPECT_GE(users, 5) << "no fmt::join found under " << testing::source_dir().string();
  EXPECT_TRUE(missing.empty()) << "fmt::join without #include <fmt/ranges.h>: "
                               << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace headcount
