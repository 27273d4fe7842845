#include "headcount/analysis/syntax.h"

#include <torch/torch.h>

#include <charconv>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"

namespace headcount::analysis {

namespace {

bool parse_int(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// The bytes of a piece or word with SentencePiece's word-start mark and whitespace removed.
std::string bare(std::string_view s) {
  static const std::string kMark = "\xE2\x96\x81";  // U+2581
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, kMark.size(), kMark) == 0) {
      i += kMark.size();
      continue;
    }
    if (s[i] != ' ' && s[i] != '\t') out += s[i];
    ++i;
  }
  return out;
}

}  // namespace

std::vector<DepSentence> read_conllu(const fs::path& path) {
  // Bounded, checked reading (line length, UTF-8, NUL bytes; a pipe read once); '\r' stripped.
  const auto lines = io::read_lines(path, {.allow_empty_file = false});
  std::vector<DepSentence> out;
  DepSentence cur;
  size_t n = 0;
  auto finish = [&](size_t at) {
    if (cur.words.empty()) return;
    const auto size = static_cast<int64_t>(cur.words.size());
    for (size_t i = 0; i < cur.words.size(); ++i)
      HC_CHECK(cur.words[i].head <= size,
               "{}: sentence ending at line {}: word {} has head {}, but the sentence has {} words",
               path.string(), at, i + 1, cur.words[i].head, size);
    out.push_back(std::move(cur));
    cur = DepSentence();
  };
  for (const auto& line : lines) {
    ++n;
    if (line.empty()) {
      finish(n);
      continue;
    }
    if (line[0] == '#') continue;
    const auto f = text::split(line, '\t');
    HC_CHECK(f.size() == 10, "{}:{}: expected 10 tab-separated CoNLL-U fields, found {}",
             path.string(), n, f.size());
    if (f[0].find('-') != std::string::npos || f[0].find('.') != std::string::npos)
      continue;  // multiword token range or empty node
    int64_t id = 0, head = 0;
    HC_CHECK(parse_int(f[0], &id), "{}:{}: ID: expected a word number, got '{}'", path.string(), n,
             f[0]);
    HC_CHECK(id == static_cast<int64_t>(cur.words.size()) + 1,
             "{}:{}: ID: expected word {} of the sentence, got {}", path.string(), n,
             cur.words.size() + 1, id);
    HC_CHECK(parse_int(f[6], &head) && head >= 0,
             "{}:{}: HEAD: expected the head's word number (0 for the root), got '{}'",
             path.string(), n, f[6]);
    HC_CHECK(head != id, "{}:{}: word {} is its own head", path.string(), n, id);
    HC_CHECK(!f[7].empty() && f[7] != "_", "{}:{}: DEPREL: expected a relation, got '{}'",
             path.string(), n, f[7]);
    if (cur.words.empty()) cur.line = n;
    DepWord w;
    w.form = f[1];
    w.head = head;
    w.relation = f[7].substr(0, f[7].find(':'));
    cur.words.push_back(std::move(w));
  }
  finish(n);
  return out;
}

std::optional<std::vector<int64_t>> map_pieces_to_words(const std::vector<std::string>& pieces,
                                                        const std::vector<std::string>& words) {
  std::vector<int64_t> char_word;  // word of each byte of the joined words
  std::string joined;
  for (size_t w = 0; w < words.size(); ++w) {
    const auto b = bare(words[w]);
    joined += b;
    char_word.insert(char_word.end(), b.size(), static_cast<int64_t>(w));
  }
  std::vector<int64_t> out;
  size_t pos = 0;
  for (const auto& p : pieces) {
    const auto b = bare(p);
    if (b.empty()) {
      // A bare word-start mark (SentencePiece puts one before digits, punctuation and unknown
      // characters): part of the word whose characters follow it; none at the very end.
      out.push_back(pos < joined.size() ? char_word[pos] : -1);
      continue;
    }
    if (joined.compare(pos, b.size(), b) != 0) return std::nullopt;
    out.push_back(char_word[pos]);
    pos += b.size();
  }
  if (pos != joined.size()) return std::nullopt;
  return out;
}

torch::Tensor word_attention(const torch::Tensor& w, const std::vector<int64_t>& piece_word,
                             int64_t n_words) {
  HC_CHECK(w.dim() == 2 && w.size(0) == w.size(1) &&
               w.size(0) == static_cast<int64_t>(piece_word.size()),
           "word_attention: expected [P, P] weights with one word index per piece");
  const int64_t P = w.size(0);
  // M [P, n]: piece -> word membership, built entry by entry: on the host, where the result is
  // read (SyntaxStats::add), so the weights are copied there too.
  auto m = torch::zeros({P, n_words}, torch::kDouble);  // device: cpu (host membership matrix)
  for (int64_t p = 0; p < P; ++p)
    if (piece_word[p] >= 0) m[p][piece_word[p]] = 1.0;
  const auto summed = w.to(torch::kDouble).cpu().matmul(m);  // [P, n]: to a word, summed
  const auto counts = m.sum(0);                              // pieces per word
  auto out = m.t().matmul(summed);                           // [n, n]: from a word, summed
  return out / counts.clamp_min(1).unsqueeze(1);             // ... then the mean
}

const char* direction_name(DepDirection d) {
  return d == DepDirection::kDependentToHead ? "dep->head" : "head->dep";
}

void SyntaxStats::add(const torch::Tensor& word_w, const DepSentence& s,
                      const std::vector<bool>& has_piece) {
  const auto n = static_cast<int64_t>(s.words.size());
  HC_CHECK(word_w.dim() == 2 && word_w.size(0) == n && word_w.size(1) == n,
           "SyntaxStats: expected [{}, {}] word attention", n, n);
  auto ok = [&](int64_t i) { return has_piece.empty() || has_piece[i]; };
  const auto a = word_w.to(torch::kDouble).cpu().contiguous();  // read through an accessor
  const auto acc = a.accessor<double, 2>();
  // Most-attended other word of each word (a word never predicts itself; pieceless words never
  // win).
  std::vector<int64_t> top(n, -1);
  for (int64_t i = 0; i < n; ++i) {
    double best = -1;
    for (int64_t j = 0; j < n; ++j)
      if (j != i && ok(j) && acc[i][j] > best) best = acc[i][j], top[i] = j;
  }
  for (int64_t d = 0; d < n; ++d) {
    const int64_t h = s.words[d].head - 1;
    if (h < 0 || !ok(d) || !ok(h)) continue;
    auto& rc = relations[s.words[d].relation];
    rc[0].total += 1;
    rc[0].hits += top[d] == h ? 1 : 0;
    rc[1].total += 1;
    rc[1].hits += top[h] == d ? 1 : 0;
  }
}

void OffsetBaseline::add(const DepSentence& s, const std::vector<bool>& has_piece) {
  const auto n = static_cast<int64_t>(s.words.size());
  auto ok = [&](int64_t i) { return has_piece.empty() || has_piece[i]; };
  for (int64_t d = 0; d < n; ++d) {
    const int64_t h = s.words[d].head - 1;
    if (h < 0 || !ok(d) || !ok(h)) continue;
    auto& per_dir = counts[s.words[d].relation];
    for (int64_t k = -max_offset; k <= max_offset; ++k) {
      if (k == 0) continue;
      auto& a = per_dir[0][k];  // from the dependent, the word at d + k
      a.total += 1;
      a.hits += d + k == h ? 1 : 0;
      auto& b = per_dir[1][k];  // from the head, the word at h + k
      b.total += 1;
      b.hits += h + k == d ? 1 : 0;
    }
  }
}

std::pair<int64_t, double> OffsetBaseline::best(const std::string& relation, DepDirection d) const {
  const auto it = counts.find(relation);
  if (it == counts.end()) return {0, 0};
  std::pair<int64_t, double> out{0, -1};
  for (const auto& [k, c] : it->second[static_cast<int>(d)])
    if (c.accuracy() > out.second) out = {k, c.accuracy()};
  if (out.second < 0) out.second = 0;
  return out;
}

double OffsetBaseline::arcs(const std::string& relation, DepDirection d) const {
  const auto it = counts.find(relation);
  if (it == counts.end() || it->second[static_cast<int>(d)].empty()) return 0;
  return it->second[static_cast<int>(d)].begin()->second.total;
}

SyntacticVerdict syntactic_verdict(const SyntaxStats& head, const OffsetBaseline& baseline,
                                   const std::vector<std::string>& relations, double margin,
                                   double min_arcs) {
  SyntacticVerdict v;
  double best_gain = -2;
  for (const auto& r : relations) {
    const auto it = head.relations.find(r);
    if (it == head.relations.end()) continue;
    for (auto d : {DepDirection::kDependentToHead, DepDirection::kHeadToDependent}) {
      const auto& c = it->second[static_cast<int>(d)];
      if (c.total < min_arcs) continue;
      const double base = baseline.best(r, d).second;
      const double gain = c.accuracy() - base;
      if (gain > best_gain) {
        best_gain = gain;
        v.relation = r;
        v.direction = d;
        v.accuracy = c.accuracy();
        v.baseline = base;
      }
    }
  }
  v.syntactic = best_gain >= margin - 1e-12;
  return v;
}

}  // namespace headcount::analysis
