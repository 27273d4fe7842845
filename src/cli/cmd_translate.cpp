// headcount translate / eval: decode with a checkpoint; score a split or given files.
#include <algorithm>
#include <cstdio>
#include <map>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/outputs.h"
#include "headcount/decode/translate.h"
#include "headcount/eval/chrf.h"
#include "headcount/eval/record.h"

namespace headcount::cli {
namespace {

// The flags that stand for decode.* keys: applied over the checkpoint's config as --set is, so
// they take exactly the values the key takes.
struct DecodeFlag {
  const char* flag;
  const char* key;
  const char* help;
};
constexpr DecodeFlag kDecodeFlags[] = {
    {"--beam", "decode.beam", "Beam size (1: greedy); default decode.beam"},
    {"--length-penalty", "decode.length_penalty", "GNMT alpha; default decode.length_penalty"},
    {"--batch-size", "decode.batch_size", "Sentences decoded together; default decode.batch_size"},
};

struct DecodeArgs {
  std::string checkpoint;
  std::vector<std::string> sets;
  std::map<std::string, std::string> flag_values;  // flag -> its text, for the flags given
};

void add_decode_args(CLI::App* cmd, DecodeArgs& a) {
  cmd->add_option("--checkpoint", a.checkpoint, "Checkpoint folder (e.g. RUN/checkpoints/best)")
      ->required()
      ->check(checkpoint_folder());
  for (const auto& f : kDecodeFlags) {
    cmd->add_option(f.flag, a.flag_values[f.flag], f.help)->check(fits_config_key(f.key));
  }
  cmd->add_option("--set", a.sets,
                  "Override a config key of the checkpoint (decode.*, threads.*, device)")
      ->type_name("KEY=VALUE");
}

std::vector<FlagOverride> decode_flags(const DecodeArgs& a) {
  std::vector<FlagOverride> out;
  for (const auto& f : kDecodeFlags) {
    const auto it = a.flag_values.find(f.flag);
    if (it != a.flag_values.end() && !it->second.empty())
      out.push_back({f.flag, f.key, it->second});
  }
  return out;
}

decode::Translator load(const DecodeArgs& a) {
  return decode::load_translator(a.checkpoint, a.sets, decode_flags(a));
}

// The lines each reference set's scores print, as sacreBLEU prints them.
void print_scores(const std::string& what, const std::vector<eval::ReferenceScores>& scores) {
  const std::string chrf_name = eval::Chrf().name();
  for (const auto& s : scores) {
    std::printf("%s %s: BLEU|%s = %.2f %s\n", what.c_str(), s.name.c_str(),
                s.bleu_signature.c_str(), *s.bleu, s.bleu_verbose.c_str());
    std::printf("%s %s: %s|%s = %.2f\n", what.c_str(), s.name.c_str(), chrf_name.c_str(),
                s.chrf_signature.c_str(), *s.chrf);
  }
}

struct EvalArgs {
  DecodeArgs decode;
  std::string split = "test";
  std::string src;
  std::vector<std::string> refs;
  std::string out;
  std::string hyp_out;
  std::vector<std::string> tune_length_penalty;  // GNMT alphas to try on dev
};

void add_eval_args(CLI::App* cmd, EvalArgs& a) {
  add_decode_args(cmd, a.decode);
  cmd->add_option("--split", a.split, "dev or test (the checkpoint's data config)")
      ->check(CLI::IsMember({"dev", "test"}))
      ->capture_default_str();
  cmd->add_option("--src", a.src, "Source file instead of a split")->check(CLI::ExistingFile);
  cmd->add_option("--ref", a.refs, "Reference file(s) for --src")->check(CLI::ExistingFile);
  cmd->add_option("--out", a.out, "Write the result as JSON here")->check(output_file());
  cmd->add_option("--hyp-out", a.hyp_out, "Write the translations here")->check(output_file());
  cmd->add_option("--tune-length-penalty", a.tune_length_penalty,
                  "Decode the dev split with each GNMT alpha listed (e.g. 0.6,1.0,1.4,1.8,2.2), "
                  "then --split (or --src) with the one of the best dev BLEU (the first of "
                  "equals); prints every dev score and the choice, and the --out record holds "
                  "both (length_penalty_tuning, length_penalty)")
      ->delimiter(',')
      ->type_name("A,B,...")
      ->check(fits_config_key("decode.length_penalty"));
}

// --tune-length-penalty: t decodes with the alpha of the best dev BLEU (the first listed of equal
// ones), each alpha's dev score printed and returned in the order tried.
std::vector<eval::EvalRecord::TunedPenalty> tune_length_penalty(decode::Translator& t,
                                                                const EvalArgs& a) {
  const bool set = std::any_of(a.decode.sets.begin(), a.decode.sets.end(), [](const auto& kv) {
    return kv.rfind("decode.length_penalty=", 0) == 0;
  });
  HC_CHECK(a.decode.flag_values.at("--length-penalty").empty() && !set,
           "--tune-length-penalty chooses the length penalty on dev: give it without "
           "--length-penalty or --set decode.length_penalty");
  const auto dev = decode::split_inputs(t, "dev", a.decode.sets);
  HC_CHECK(!dev.references.empty(), "--tune-length-penalty: the dev split has no references");
  std::vector<eval::EvalRecord::TunedPenalty> tried;
  for (const auto& text : a.tune_length_penalty) {
    t.search.length_penalty = std::stod(text);
    const auto tr = decode::translate_lines(t, dev.sources, dev.source_name, dev.references);
    const auto& s = tr.scores.front();
    std::printf("dev with length penalty %s: BLEU %.2f %s\n", text.c_str(), *s.bleu,
                s.bleu_verbose.c_str());
    tried.push_back({t.search.length_penalty, *s.bleu});
  }
  // std::max_element returns the first of equal maxima.
  const auto best = *std::max_element(tried.begin(), tried.end(), [](const auto& x, const auto& y) {
    return x.dev_bleu < y.dev_bleu;
  });
  t.search.length_penalty = best.length_penalty;
  std::printf("length penalty %g: the best dev BLEU (%.2f) of %zu\n", best.length_penalty,
              best.dev_bleu, tried.size());
  std::fflush(stdout);
  return tried;
}

void run_eval(const EvalArgs& a) {
  HC_CHECK(a.refs.empty() || !a.src.empty(),
           "--ref needs --src: the references of a split are the checkpoint's data config's (use "
           "--src with --ref to score other files)");
  decode::Translator t = load(a.decode);
  const auto in = a.src.empty() ? decode::split_inputs(t, a.split, a.decode.sets)
                                : decode::file_inputs(a.src, a.refs);
  std::vector<io::NamedPath> inputs = {{"the source file", in.source_name}};
  for (const auto& r : in.ref_files) inputs.push_back({"a reference file", r});
  io::refuse_overwriting({{"--out", a.out}, {"--hyp-out", a.hyp_out}}, inputs);
  io::refuse_writing_into({{"--out", a.out}, {"--hyp-out", a.hyp_out}},
                          {"the checkpoint", a.decode.checkpoint});
  const auto tuning = a.tune_length_penalty.empty() ? std::vector<eval::EvalRecord::TunedPenalty>{}
                                                    : tune_length_penalty(t, a);
  const auto tr = decode::translate_lines(t, in.sources, in.source_name, in.references);
  if (!a.hyp_out.empty()) io::write_lines_atomic(a.hyp_out, tr.text);
  print_scores(in.data, tr.scores);
  if (a.out.empty()) return;
  auto record = decode::eval_record(t, a.decode.checkpoint, in, tr, a.hyp_out);
  record.length_penalty_tuning = tuning;
  eval::write_eval_record(a.out, record);
}

}  // namespace

void add_translate_command(CLI::App& app) {
  auto a = std::make_shared<DecodeArgs>();
  auto input = std::make_shared<std::string>("-");
  auto output = std::make_shared<std::string>("-");
  auto* cmd = app.add_subcommand(
      "translate", "Translate source sentences (one a line) with a checkpoint, pruned or not");
  add_decode_args(cmd, *a);
  cmd->add_option("-i,--input", *input, "Source file ('-': stdin)")->capture_default_str();
  cmd->add_option("-o,--output", *output, "Output file ('-': stdout)")
      ->check(output_file())
      ->capture_default_str();
  cmd->callback([a, input, output] {
    io::refuse_overwriting({{"--output", *output}}, {{"the input", *input}});
    io::refuse_writing_into({{"--output", *output}}, {"the checkpoint", a->checkpoint});
    decode::Translator t = load(*a);
    const auto lines = io::read_lines_or_stdin(*input, {.allow_empty_file = true});
    const auto out = decode::translate_lines(t, lines, *input == "-" ? "<stdin>" : *input).text;
    if (*output == "-") {
      for (const auto& s : out) std::printf("%s\n", s.c_str());
    } else {
      io::write_lines_atomic(*output, out);
    }
  });
}

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand(
      "eval", "Translate a split (or given files) and score it with BLEU and chrF");
  add_eval_args(cmd, *a);
  cmd->callback([a] { run_eval(*a); });
}

}  // namespace headcount::cli
