// The default corpus extractor, parallel-data validation and length filtering.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"
#include "headcount/data/bible.h"
#include "headcount/data/corpus.h"
#include "headcount/data/links.h"
#include "test_util.h"

namespace headcount {
namespace {

using data::osis_to_text;
using testing::error_of;
using testing::TempDir;

void write(const fs::path& p, const std::string& content) {
  std::ofstream(p, std::ios::binary) << content;
}

TEST(Osis, NoteBetweenWordsLeavesASpace) {
  // The WEB's Genesis 1:1: diatheke -f plain prints "Godcreated".
  EXPECT_EQ(osis_to_text(R"(<w lemma="strong:H0430">God</w><note placement="foot"><reference )"
                         R"(type="annotateRef">1:1 </reference>The Hebrew word rendered “God” )"
                         R"(is “אֱלֹהִ֑ים” (Elohim).</note><w lemma="strong:H1254">created</w> )"
                         R"(<w>the</w> <w>heavens</w>.)"),
            "God created the heavens.");
}

TEST(Osis, NoteBeforePunctuationLeavesNoSpace) {
  EXPECT_EQ(osis_to_text("<w>earth</w><note>a note</note>."), "earth.");
  EXPECT_EQ(osis_to_text("coins</q> <note>about coins</note> <q>? Not"), "coins? Not");
}

TEST(Osis, TitlesSpeakersAndMilestonesAreDropped) {
  EXPECT_EQ(osis_to_text(R"(<title type="psalm">A Psalm of David.</title> <w>The</w> LORD)"),
            "The LORD");
  EXPECT_EQ(osis_to_text(R"(<speaker>Beloved</speaker> <lg sID="x"/> <l sID="y"/>My love)"),
            "My love");
  EXPECT_EQ(osis_to_text(R"(end<milestone type="x-p" marker="¶"/>start)"), "end start");
  EXPECT_EQ(osis_to_text(R"(this,<l eID="a"/><l sID="b"/>you)"), "this, you");
}

TEST(Osis, InlineElementsKeepTheirTextWithoutExtraSpaces) {
  EXPECT_EQ(osis_to_text(
                R"(<divineName>Lord</divineName>’s <transChange type="added">was</transChange>,)"),
            "Lord’s was,");
  EXPECT_EQ(osis_to_text(R"(<q marker="" who="Jesus">“Follow me.”</q>)"), "“Follow me.”");
}

TEST(Osis, NestedNotesEntitiesPilcrowAndWhitespace) {
  EXPECT_EQ(osis_to_text("A<note>x <rdg>y <catchWord>z</catchWord></rdg> w</note> B"), "A B");
  EXPECT_EQ(osis_to_text("Tom &amp; Jerry &lt;3 &#65;&#x42;"), "Tom & Jerry <3 AB");
  EXPECT_EQ(osis_to_text("¶ And   it\tcame\nto pass"), "And it came to pass");
  EXPECT_EQ(osis_to_text("  "), "");
}

TEST(Osis, TextAfterTheEndOfAChapterOrBookIsNotPartOfTheVerse) {
  EXPECT_EQ(osis_to_text(R"(saints. Amen. <chapter eID="Rev.22"/> <div sID="g" type="glossary"/> )"
                         R"(The following words used in the WEB...)"),
            "saints. Amen.");
  EXPECT_EQ(osis_to_text(R"(end. <div eID="b1" osisID="Rev" type="book"/> Glossary)"), "end.");
  EXPECT_EQ(osis_to_text(R"(<chapter sID="Gen.2"/>Thus the heavens)"), "Thus the heavens");
}

using Numbers = std::vector<std::vector<std::string>>;

TEST(Strong, WordsCarryTheNumbersOfTheirLetters) {
  // A phrase, a word glued to punctuation, a note between tagged words, two numbers in one lemma,
  // leading zeros, an entity inside a tagged word, untagged words.
  const auto t = data::osis_to_tagged_text(
      R"(<w lemma="strong:H7225">EN el principio</w> <w lemma="strong:H1254">cri&#243;</w>)"
      R"(<note>x <w lemma="strong:H9">no</w></note><w lemma="strong:H0430 strong:H853">Dios</w>, )"
      R"(the <w lemma="lemma.TR:x strong:G00025">loved</w>.)");
  EXPECT_EQ(t.text, "EN el principio cri\u00f3 Dios, the loved.");
  EXPECT_EQ(t.text, osis_to_text(R"(<w lemma="strong:H7225">EN el principio</w> <w )"
                                 R"(lemma="strong:H1254">cri&#243;</w><note>x <w )"
                                 R"(lemma="strong:H9">no</w></note><w lemma="strong:H0430 )"
                                 R"(strong:H853">Dios</w>, the <w lemma="lemma.TR:x )"
                                 R"(strong:G00025">loved</w>.)"));
  const Numbers expected = {{"H7225"},        {"H7225"}, {"H7225"}, {"H1254"},
                            {"H430", "H853"}, {},        {"G25"}};
  EXPECT_EQ(t.word_numbers, expected);
  // Punctuation from another element does not tag a word; a word of punctuation only takes its
  // characters' numbers.
  const auto u =
      data::osis_to_tagged_text(R"(<w lemma="strong:H1">a</w><w lemma="strong:H2">,</w> )"
                                R"(<w lemma="strong:H3">¿</w> b)");
  EXPECT_EQ(u.text, "a, \u00bf b");
  EXPECT_EQ(u.word_numbers, (Numbers{{"H1"}, {"H3"}, {}}));
}

TEST(Strong, LemmaForms) {
  // The Spanish module writes two numbers as "strong:H5315 H2416" (the second without a prefix);
  // repeats count once; tokens of another lemma kind, and the bare ones after them, are no
  // Strong's numbers; a letter suffix is kept; single quotes work.
  const auto t = data::osis_to_tagged_text(
      R"(<w lemma="strong:H5315 H2416">hay vida</w> <w lemma="strong:H0398 H0398">comer&#225;s</w> )"
      R"(<w lemma="lemma.TR:agape 25">a</w> <w lemma="strong:G25 lemma.TR:x G3">b</w> )"
      R"(<w lemma="strong:H1254a">c</w> <w lemma='strong:H0007'>d</w> <w lemma="strong:H0">e</w> )"
      R"(<w morph="strong:H1">f</w>)");
  EXPECT_EQ(t.text, "hay vida comer\u00e1s a b c d e f");
  const Numbers expected = {
      {"H5315", "H2416"}, {"H5315", "H2416"}, {"H398"}, {}, {"G25"}, {"H1254a"}, {"H7"}, {}, {}};
  EXPECT_EQ(t.word_numbers, expected);
}

TEST(Strong, WordsAcrossElementsNestedElementsAndPunctuation) {
  // A word whose letters come from two elements carries both numbers; a nested <w> also carries
  // the outer one's; a dash or quote from another element does not tag the word it touches, nor
  // does an inline element without numbers (<transChange>).
  const auto t = data::osis_to_tagged_text(
      R"(<w lemma="strong:H1">Lord</w><w lemma="strong:H2">’s</w> )"
      R"(<w lemma="strong:H3">out <w lemma="strong:H4">in</w></w> )"
      R"(<w lemma="strong:H5">said</w><w lemma="strong:H6">—</w><transChange>x</transChange> )"
      R"(<q>“<w lemma="strong:H7">Go</w>”</q><w lemma="strong:H8">.</w> )"
      R"(<w lemma="strong:H9">;</w>)");
  EXPECT_EQ(t.text, "Lord\u2019s out in said\u2014x \u201cGo\u201d. ;");
  const Numbers expected = {{"H1", "H2"}, {"H3"}, {"H3", "H4"}, {"H5"}, {"H7"}, {"H9"}};
  EXPECT_EQ(t.word_numbers, expected);
}

TEST(Strong, TaggedTextIsOsisToTextWithOneEntryPerWord) {
  // osis_to_text is the tagged text's text, for the inputs of the Osis tests above and more.
  for (
      const std::string osis :
      {R"(<w lemma="strong:H0430">God</w><note placement="foot"><reference )"
       R"(type="annotateRef">1:1 </reference>The “God”.</note><w lemma="strong:H1254">created</w> )"
       R"(<w>the</w> <w>heavens</w>.)",
       "<w>earth</w><note>a note</note>.", "coins</q> <note>about coins</note> <q>? Not",
       R"(<title type="psalm">A Psalm.</title> <w lemma="strong:H1">The</w> LORD)",
       R"(<speaker>Beloved</speaker> <lg sID="x"/> <l sID="y"/>My love)",
       R"(end<milestone type="x-p" marker="¶"/>start)", R"(this,<l eID="a"/><l sID="b"/>you)",
       R"(<divineName>Lord</divineName>’s <transChange type="added">was</transChange>,)",
       "A<note>x <rdg>y</rdg> w</note> B", "Tom &amp; Jerry &lt;3 &#65;&#x42;",
       "¶ And   it\tcame\nto pass", "  ", "", R"(saints. <chapter eID="Rev.22"/> Glossary)",
       R"(<w lemma="strong:H1">a</w>&#160;<w lemma="strong:H2">b</w>&nbsp;c)",
       R"(<w lemma="strong:H1"> a  b </w><note>n</note><w lemma="strong:H2">,</w>)"}) {
    const auto t = data::osis_to_tagged_text(osis);
    EXPECT_EQ(t.text, osis_to_text(osis)) << osis;
    EXPECT_EQ(t.word_numbers.size(), t.text.empty() ? 0 : text::split(t.text, ' ').size()) << osis;
  }
  // Non-breaking spaces (entities or not) separate words like spaces.
  const auto t =
      data::osis_to_tagged_text(R"(<w lemma="strong:H1">a</w>&#160;<w lemma="strong:H2">b</w>)");
  EXPECT_EQ(t.text, "a b");
  EXPECT_EQ(t.word_numbers, (Numbers{{"H1"}, {"H2"}}));
}

TEST(Strong, LinksSureForOneWordEachSidePossibleOtherwise) {
  // es: "EN el principio crio Dios" (H7225 x3, H1254, H430); en: "In the beginning God created
  // God" (-, -, H7225, H430, H1254, H430); H9 only in English.
  const Numbers es = {{"H7225"}, {"H7225"}, {"H7225"}, {"H1254"}, {"H430"}};
  const Numbers en = {{}, {"H9"}, {"H7225"}, {"H430"}, {"H1254"}, {"H430"}};
  const auto links = data::strong_links(es, en);
  EXPECT_EQ(data::format_links(links), "0?2 1?2 2?2 4?3 3-4 4?5");
  // A word with two numbers (the Spanish "Jehov\u00e1" for "LORD God") links to each.
  EXPECT_EQ(data::format_links(data::strong_links({{"H3068", "H430"}, {}}, {{"H3068"}, {"H430"}})),
            "0-0 0-1");
  // The same pair of words through a sure and a possible number stays sure.
  EXPECT_EQ(data::format_links(data::strong_links({{"A", "B"}, {"B"}}, {{"A", "B"}})), "0-0 1?0");
}

TEST(Strong, LinksFileRoundTripAndErrors) {
  TempDir dir;
  const std::vector<std::vector<data::WordLink>> lines = {
      {{3, 1, true}, {0, 0, false}}, {}, {{12, 7, false}}};
  std::vector<std::string> text;
  for (const auto& l : lines) text.push_back(data::format_links(l));
  EXPECT_EQ(text[0], "0?0 3-1");
  io::write_lines_atomic(dir / "a.links", text);
  const auto back = data::read_links(dir / "a.links");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0], (std::vector<data::WordLink>{{0, 0, false}, {3, 1, true}}));
  EXPECT_TRUE(back[1].empty());
  EXPECT_EQ(back[2], lines[2]);
  for (const char* bad : {"1-", "-2", "1:2", "a-1", "1-2-3", "1--2", "-1-2"}) {
    write(dir / "b.links", fmt::format("0-0\n{}\n", bad));
    const auto e = error_of([&] { data::read_links(dir / "b.links"); });
    EXPECT_NE(e.find("b.links line 2: bad link"), std::string::npos) << bad << ": " << e;
  }
}

TEST(Osis, ParseImpSkipsHeadingsAndJoinsLines) {
  const auto v = data::parse_imp(
      "$$$[ Module Heading ]\n\n$$$Genesis 0:0\nbook heading\n$$$Genesis 1:0\n<chapter/>\n"
      "$$$Genesis 1:1\nIn the\nbeginning\n$$$1 Samuel 2:3\nText\n");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].key(), "Genesis 1:1");
  EXPECT_EQ(v[0].osis, "In the\nbeginning");
  EXPECT_EQ(v[1].book, "1 Samuel");
  EXPECT_EQ(v[1].chapter, 2);
  EXPECT_EQ(v[1].verse, 3);
}

TEST(Parallel, DifferentLineCountsNameBothFiles) {
  TempDir dir;
  write(dir / "a.es", "uno\ndos\ntres\n");
  write(dir / "a.en", "one\ntwo\n");
  const std::string e = error_of([&] { data::read_parallel(dir / "a.es", dir / "a.en"); });
  EXPECT_NE(e.find("a.es has 3 lines"), std::string::npos) << e;
  EXPECT_NE(e.find("a.en has 2"), std::string::npos) << e;
}

TEST(Parallel, InvalidUtf8NamesFileAndLine) {
  TempDir dir;
  write(dir / "b.es", "uno\ndos \xff\xfe\n");
  write(dir / "b.en", "one\ntwo\n");
  const std::string e = error_of([&] { data::read_parallel(dir / "b.es", dir / "b.en"); });
  EXPECT_NE(e.find("b.es:2: invalid UTF-8 at byte 5"), std::string::npos) << e;
  // Overlong encodings and surrogates are invalid too.
  write(dir / "c.es", "\xc0\xafx\n");
  EXPECT_NE(error_of([&] { io::read_lines(dir / "c.es"); }).find("c.es:1"), std::string::npos);
  write(dir / "d.es", "\xed\xa0\x80\n");
  EXPECT_NE(error_of([&] { io::read_lines(dir / "d.es"); }).find("d.es:1"), std::string::npos);
}

TEST(Parallel, MissingAndEmptyFiles) {
  TempDir dir;
  write(dir / "e.en", "");
  write(dir / "f.en", "x\n");
  EXPECT_NE(error_of([&] {
              data::read_parallel(dir / "nope.es", dir / "f.en");
            }).find("nope.es: file not found"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              data::read_parallel(dir / "f.en", dir / "e.en");
            }).find("e.en: file is empty"),
            std::string::npos);
}

TEST(Parallel, WindowsLineEndingsAreStripped) {
  TempDir dir;
  write(dir / "g.es", "uno\r\ndos\r\n");
  write(dir / "g.en", "one\ntwo");
  const auto t = data::read_parallel(dir / "g.es", dir / "g.en");
  EXPECT_EQ(t.src, (std::vector<std::string>{"uno", "dos"}));
  EXPECT_EQ(t.tgt, (std::vector<std::string>{"one", "two"}));
}

TEST(Parallel, LengthFilterCountsEachReason) {
  data::ParallelText t;
  t.src = {"a b", "", "a b c d e f", "a", "a b c", "x\u00a0y"};
  t.tgt = {"a b", "x", "a", "a b c d e", "a b", "x y"};
  // min 1, max 5, ratio 3: keep 0; empty; 6 > 5 too long; 5 tokens vs 1 -> ratio; keep; keep
  // (the no-break space separates tokens).
  const auto r = data::filter_by_length(t, 1, 5, 3.0);
  EXPECT_EQ(r.total, 6u);
  EXPECT_EQ(r.too_short, 1u);
  EXPECT_EQ(r.too_long, 1u);
  EXPECT_EQ(r.bad_ratio, 1u);
  EXPECT_EQ(r.kept, 3u);
  EXPECT_EQ(t.src, (std::vector<std::string>{"a b", "a b c", "x\u00a0y"}));
  EXPECT_EQ(data::count_tokens("  a \t b\u3000c "), 3u);
}

TEST(Parallel, MissingFilesWithoutPrepareIsAClearError) {
  TempDir dir;
  DataConfig d;
  d.dir = dir.path().string();
  d.prepare = "none";
  const std::string e = error_of([&] { data::load_corpus(d); });
  EXPECT_NE(e.find("corpus files missing"), std::string::npos) << e;
  EXPECT_NE(e.find("data.prepare"), std::string::npos) << e;
}

bool have_sword() {
  return std::system("command -v mod2imp >/dev/null 2>&1") == 0 &&
         fs::exists("/usr/share/sword/mods.d/spaRV1909eb.conf");
}

TEST(Bible, DeterministicHeldOutByChapterAndClean) {
  if (!have_sword()) {
    if (testing::running_in_ci())
      FAIL() << "SWORD tools/modules missing: the set-up must install them";
    GTEST_SKIP() << "mod2imp or the SWORD modules are not installed";
  }
  TempDir a, b;
  data::BibleOptions o;
  o.out = a.path();
  const auto stats = data::build_bible_corpus(o);
  o.out = b.path();
  data::build_bible_corpus(o);
  for (const auto& entry : fs::directory_iterator(a.path())) {
    const auto name = entry.path().filename();
    EXPECT_EQ(io::read_file(entry.path()), io::read_file(b.path() / name)) << name;
  }
  ASSERT_EQ(stats.splits.size(), 3u);
  // 31,077 verses in all three modules, about 2,100 held out.
  EXPECT_GE(stats.splits[0].verses, 28000u);
  EXPECT_GE(stats.common, 31000u);
  EXPECT_NEAR(static_cast<double>(stats.splits[1].verses), 1000.0, 200.0);
  EXPECT_NEAR(static_cast<double>(stats.splits[2].verses), 1000.0, 200.0);

  // Whole chapters held out: no chapter in two splits.
  auto chapters = [&](const char* split) {
    std::set<std::string> out;
    for (const auto& key : io::read_lines(a.path() / (std::string(split) + ".ref"))) {
      out.insert(key.substr(0, key.rfind(':')));
    }
    return out;
  };
  const auto train = chapters("train"), dev = chapters("dev"), test = chapters("test");
  for (const auto& c : dev) EXPECT_EQ(train.count(c) + test.count(c), 0u) << c;
  for (const auto& c : test) EXPECT_EQ(train.count(c), 0u) << c;

  // No markup, no glued words from removed notes, aligned files.
  for (const char* f : {"train.es", "train.en", "test.en", "test.kjv.en", "dev.es"}) {
    const auto text = io::read_file(a.path() / f);
    EXPECT_EQ(text.find('<'), std::string::npos) << f;
    EXPECT_EQ(text.find("\u00b6"), std::string::npos) << f;
    EXPECT_EQ(text.find("Godcreated"), std::string::npos) << f;
  }
  const auto en = io::read_lines(a.path() / "train.en");
  EXPECT_EQ(en.at(0), "In the beginning, God created the heavens and the earth.");
  EXPECT_EQ(io::read_lines(a.path() / "train.es").at(0),
            "EN el principio crió Dios los cielos y la tierra.");
  EXPECT_EQ(io::read_lines(a.path() / "test.kjv.en").size(),
            io::read_lines(a.path() / "test.en").size());

  // Gold links: one line per verse, indices inside the lines' words; the KJV's Genesis 11:1 (the
  // first dev verse) links "earth" to the Spanish phrase "ERA entonces toda la tierra" and
  // "language" to "lengua" alone (sure).
  for (const char* split : {"dev", "test"}) {
    const auto es = io::read_lines(a.path() / (std::string(split) + ".es"));
    for (const char* side : {".en", ".kjv.en"}) {
      const std::string links_name =
          std::string(split) + (std::string(side) == ".en" ? ".links" : ".kjv.links");
      const auto links = data::read_links(a.path() / links_name);
      const auto tgt = io::read_lines(a.path() / (std::string(split) + side));
      ASSERT_EQ(links.size(), tgt.size()) << links_name;
      size_t total = 0;
      for (size_t i = 0; i < links.size(); ++i) {
        const auto ns = text::split(es[i], ' ').size(), nt = text::split(tgt[i], ' ').size();
        for (const auto& l : links[i]) {
          EXPECT_LT(static_cast<size_t>(l.src), ns) << links_name << " line " << i + 1;
          EXPECT_LT(static_cast<size_t>(l.tgt), nt) << links_name << " line " << i + 1;
        }
        total += links[i].size();
      }
      EXPECT_GT(total, 5 * links.size()) << links_name;
    }
  }
  EXPECT_EQ(io::read_lines(a.path() / "dev.kjv.en").at(0),
            "And the whole earth was of one language, and of one speech.");
  EXPECT_EQ(io::read_lines(a.path() / "dev.kjv.links").at(0),
            "0?3 1?3 2?3 3?3 4?3 5?6 6?6 8?6 9?6 7-7 5?10 6?10 8?10 9?10 10?11 11?11");
  EXPECT_GT(stats.ref2_links.coverage(), 0.3);
  EXPECT_GT(stats.ref2_links.purity, stats.tgt_links.purity);
}

}  // namespace
}  // namespace headcount
