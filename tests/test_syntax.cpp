// Syntactic heads: CoNLL-U reading, subword-to-word maps, word-level attention, per-relation
// accuracies and the fixed-offset baseline, on hand-made inputs with hand-computed answers; then
// the Analyzer's plumbing on a tiny model.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tensor_util.h"

#include <fmt/format.h>

#include "headcount/analysis/analyzer.h"
#include "headcount/analysis/syntax.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/train/trainer.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount::analysis {
namespace {

using testing::mat;

std::string row(int id, const std::string& form, int head, const std::string& rel) {
  return fmt::format("{}\t{}\t_\t_\t_\t_\t{}\t{}\t_\t_", id, form, head, rel);
}

TEST(Conllu, ReadsWordsHeadsAndRelationsSkippingRangesAndEmptyNodes) {
  testing::TempDir dir;
  io::write_lines_atomic(
      dir / "p.conllu",
      {"# sent_id = 1", "# text = Dios creó los cielos.", row(1, "Dios", 2, "nsubj"),
       row(2, "creó", 0, "root"), row(3, "los", 4, "det"), row(4, "cielos", 2, "obj"),
       row(5, ".", 2, "punct"), "", "# sent_id = 2", "1-2\tdel\t_\t_\t_\t_\t_\t_\t_\t_",
       row(1, "de", 2, "case"), row(2, "el", 3, "nmod:poss"), "2.1\tx\t_\t_\t_\t_\t_\t_\t_\t_",
       row(3, "fue", 0, "root"), ""});
  const auto s = read_conllu(dir / "p.conllu");
  ASSERT_EQ(s.size(), 2u);
  ASSERT_EQ(s[0].words.size(), 5u);
  EXPECT_EQ(s[0].line, 3u);
  EXPECT_EQ(s[0].words[0].form, "Dios");
  EXPECT_EQ(s[0].words[0].head, 2);
  EXPECT_EQ(s[0].words[1].head, 0);
  EXPECT_EQ(s[0].words[3].relation, "obj");
  ASSERT_EQ(s[1].words.size(), 3u);
  EXPECT_EQ(s[1].words[1].relation, "nmod");  // subtype folded
  EXPECT_EQ(s[1].words[2].form, "fue");
}

TEST(Conllu, MalformedFilesAreErrorsNamingTheLine) {
  testing::TempDir dir;
  auto error_for = [&](std::vector<std::string> lines) {
    io::write_lines_atomic(dir / "bad.conllu", lines);
    return testing::error_of([&] { read_conllu(dir / "bad.conllu"); });
  };
  EXPECT_NE(
      error_for({row(1, "a", 0, "root"), "2\tb\t_\t1\tdep"}).find("bad.conllu:2: expected 10"),
      std::string::npos);
  EXPECT_NE(error_for({row(1, "a", 0, "root"), row(3, "b", 1, "dep")}).find("bad.conllu:2: ID"),
            std::string::npos);
  EXPECT_NE(error_for({row(1, "a", 0, "root"), "2\tb\t_\t_\t_\t_\t_\tdep\t_\t_"})
                .find("bad.conllu:2: HEAD"),
            std::string::npos);
  EXPECT_NE(error_for({row(1, "a", 0, "root"), row(2, "b", 7, "dep"), ""}).find("has head 7"),
            std::string::npos);
  EXPECT_NE(error_for({row(1, "a", 1, "root")}).find("its own head"), std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              read_conllu(dir / "missing.conllu");
            }).find("missing.conllu: file not found"),
            std::string::npos);
}

TEST(Conllu, PiecesMapToTheWordsTheirCharactersBelongTo) {
  const std::string m = "\xE2\x96\x81";  // SentencePiece's word-start mark
  const auto map = map_pieces_to_words({m + "Dios", m + "cre", "ó", m + "los", m + "cielos", "."},
                                       {"Dios", "creó", "los", "cielos", "."});
  ASSERT_TRUE(map);
  EXPECT_EQ(*map, (std::vector<int64_t>{0, 1, 1, 2, 3, 4}));
  // A piece across two words belongs to the first; a bare mark to the word that follows it (METHODS
  // section 5: attention to a split word sums over its pieces, the mark included), none at the end.
  const auto joined = map_pieces_to_words({m, "ab", m, "c", m}, {"a", "bc"});
  ASSERT_TRUE(joined);
  EXPECT_EQ(*joined, (std::vector<int64_t>{0, 0, 1, 1, -1}));
  EXPECT_FALSE(map_pieces_to_words({m + "Dios"}, {"Diós"}));
  EXPECT_FALSE(map_pieces_to_words({m + "Dios"}, {"Dios", "."}));  // words left over
}

TEST(Conllu, WordAttentionSumsToAWordAndAveragesFromAWord) {
  // Pieces: p0 -> w0, p1 and p2 -> w1, p3 (EOS) -> none.
  const auto w = mat(
      {{0.1, 0.2, 0.3, 0.4}, {0.5, 0.1, 0.1, 0.3}, {0.3, 0.3, 0.2, 0.2}, {0.25, 0.25, 0.25, 0.25}});
  const auto a = word_attention(w, {0, 1, 1, -1}, 2);
  // From w0 (p0): to w0 0.1, to w1 0.2 + 0.3. From w1: the mean of p1's and p2's rows.
  EXPECT_NEAR(a[0][0].item<double>(), 0.1, 1e-12);
  EXPECT_NEAR(a[0][1].item<double>(), 0.5, 1e-12);
  EXPECT_NEAR(a[1][0].item<double>(), (0.5 + 0.3) / 2, 1e-12);
  EXPECT_NEAR(a[1][1].item<double>(), (0.2 + 0.5) / 2, 1e-12);
}

// "the old man saw the dog": the(1)->man(3) det, old(2)->man amod, man->saw(4) nsubj, saw root,
// the(5)->dog(6) det, dog->saw obj.
DepSentence sentence() {
  DepSentence s;
  s.words = {{"the", 3, "det"},  {"old", 3, "amod"}, {"man", 4, "nsubj"},
             {"saw", 0, "root"}, {"the", 6, "det"},  {"dog", 4, "obj"}};
  return s;
}

TEST(Conllu, AccuracyPerRelationAndDirectionExcludingTheWordItself) {
  // Most-attended other word per row (the diagonal is largest in row 0, but a word never
  // predicts itself): the->old, old->man, man->saw, saw->man, the->dog, dog->the.
  const auto w = mat({{0.5, 0.3, 0.1, 0.05, 0.03, 0.02},
                      {0.1, 0.1, 0.6, 0.1, 0.05, 0.05},
                      {0.1, 0.1, 0.1, 0.6, 0.05, 0.05},
                      {0.05, 0.05, 0.5, 0.1, 0.1, 0.2},
                      {0.05, 0.05, 0.1, 0.1, 0.1, 0.6},
                      {0.05, 0.05, 0.1, 0.1, 0.6, 0.1}});
  SyntaxStats s;
  s.add(w, sentence());
  // dep->head: det: the->man? no (old); the->dog? yes: 1/2. amod: old->man yes. nsubj: man->saw
  // yes. obj: dog->saw? no (the).
  EXPECT_DOUBLE_EQ(s.relations["det"][0].accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(s.relations["amod"][0].accuracy(), 1.0);
  EXPECT_DOUBLE_EQ(s.relations["nsubj"][0].accuracy(), 1.0);
  EXPECT_DOUBLE_EQ(s.relations["obj"][0].accuracy(), 0.0);
  // head->dep: det: man->the? no (saw); dog->the? yes. amod: man->old? no. nsubj: saw->man yes.
  // obj: saw->dog? no.
  EXPECT_DOUBLE_EQ(s.relations["det"][1].accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(s.relations["amod"][1].accuracy(), 0.0);
  EXPECT_DOUBLE_EQ(s.relations["nsubj"][1].accuracy(), 1.0);
  EXPECT_DOUBLE_EQ(s.relations["obj"][1].accuracy(), 0.0);
  EXPECT_EQ(s.relations.count("root"), 0u);  // the root has no head word
  // A word without pieces takes part in no arc and is never predicted.
  SyntaxStats t;
  t.add(w, sentence(), {true, false, true, true, true, true});
  EXPECT_DOUBLE_EQ(t.relations["amod"][0].total, 0);
  EXPECT_DOUBLE_EQ(t.relations["det"][0].hits, 2);  // the(1) now looks at man: a hit
}

TEST(Conllu, FixedOffsetBaselineAndTheSyntacticVerdict) {
  OffsetBaseline b;
  b.max_offset = 3;
  b.add(sentence());
  // det arcs: 1->3 (+2) and 5->6 (+1): each offset gets one of two; best +1 (ties: the first).
  const auto det = b.best("det", DepDirection::kDependentToHead);
  EXPECT_EQ(det.first, 1);
  EXPECT_DOUBLE_EQ(det.second, 0.5);
  EXPECT_DOUBLE_EQ(b.arcs("det", DepDirection::kDependentToHead), 2);
  // From the head: man->the is -2, dog->the is -1.
  EXPECT_EQ(b.best("det", DepDirection::kHeadToDependent).first, -2);
  // nsubj: man(3)->saw(4): +1 always right; amod: old(2)->man(3): +1.
  EXPECT_EQ(b.best("nsubj", DepDirection::kDependentToHead), (std::pair<int64_t, double>{1, 1.0}));
  EXPECT_EQ(b.best("obj", DepDirection::kDependentToHead), (std::pair<int64_t, double>{-2, 1.0}));
  EXPECT_EQ(b.best("xcomp", DepDirection::kDependentToHead), (std::pair<int64_t, double>{0, 0.0}));

  SyntaxStats head;
  head.relations["det"][0] = {8, 10};    // 0.8 against the baseline's 0.5: +0.3
  head.relations["nsubj"][0] = {9, 10};  // 0.9 against 1.0
  const auto v = syntactic_verdict(head, b, {"det", "nsubj"}, 0.10, 5);
  EXPECT_TRUE(v.syntactic);
  EXPECT_EQ(v.relation, "det");
  EXPECT_EQ(v.direction, DepDirection::kDependentToHead);
  EXPECT_DOUBLE_EQ(v.accuracy, 0.8);
  EXPECT_DOUBLE_EQ(v.baseline, 0.5);
  EXPECT_FALSE(syntactic_verdict(head, b, {"det"}, 0.35, 5).syntactic);   // +0.3 < 0.35
  EXPECT_FALSE(syntactic_verdict(head, b, {"det"}, 0.10, 11).syntactic);  // too few arcs
  EXPECT_FALSE(syntactic_verdict(head, b, {"nsubj"}, 0.10, 5).syntactic);
}

// The Analyzer on a tiny model with a chain parse of the dev sources (every word's head is the
// previous word): the fixed offset -1 (dependent->head) and +1 (head->dependent) are always
// right, so no head can beat the baseline, and every arc is counted once per head.
TEST(Conllu, AnalyzerCountsEveryArcOfMatchedSentences) {
  testing::TempDir dir;
  const auto checkpoint = train_tiny_model(dir, 40);
  const auto dev = io::read_lines(dir / "dev.es");
  std::vector<std::string> lines;
  int64_t arcs = 0;
  for (const auto& s : dev) {
    const auto words = text::split(s, ' ');
    for (size_t i = 0; i < words.size(); ++i)
      lines.push_back(
          row(static_cast<int>(i + 1), words[i], static_cast<int>(i), i ? "dep" : "root"));
    lines.push_back("");
    arcs += static_cast<int64_t>(words.size()) - 1;
  }
  io::write_lines_atomic(dir / "dev.conllu", lines);
  AnalyzeOptions o;
  o.checkpoint = checkpoint;
  o.sentences = 0;
  Analyzer an(o);
  const auto r = an.syntax(read_conllu(dir / "dev.conllu"));
  EXPECT_EQ(r.sentences, static_cast<int64_t>(dev.size()));
  EXPECT_EQ(r.unmatched, 0);
  ASSERT_EQ(r.heads.size(), 2u);
  EXPECT_EQ(r.baseline.best("dep", DepDirection::kDependentToHead),
            (std::pair<int64_t, double>{-1, 1.0}));
  EXPECT_EQ(r.baseline.best("dep", DepDirection::kHeadToDependent),
            (std::pair<int64_t, double>{1, 1.0}));
  for (const auto& s : r.stats) {
    EXPECT_DOUBLE_EQ(s.relations.at("dep")[0].total, static_cast<double>(arcs));
    EXPECT_FALSE(syntactic_verdict(s, r.baseline, {"dep"}).syntactic);
  }
  // Parses of other sentences: a clear error, not silently wrong numbers.
  std::vector<std::string> other;
  for (size_t i = 0; i < dev.size(); ++i) other.insert(other.end(), {row(1, "xyz", 0, "root"), ""});
  io::write_lines_atomic(dir / "other.conllu", other);
  EXPECT_NE(testing::error_of([&] {
              an.syntax(read_conllu(dir / "other.conllu"));
            }).find("do not match their CoNLL-U parse"),
            std::string::npos);
  // Too few parses.
  EXPECT_NE(testing::error_of([&] { an.syntax({}); }).find("the CoNLL-U file has 0 sentences"),
            std::string::npos);
}

}  // namespace
}  // namespace headcount::analysis
