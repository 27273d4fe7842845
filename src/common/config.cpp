// The config schema: every key, its type, range, default and meaning, in one table.
#include "headcount/common/config.h"

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "common/yaml_check.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/text.h"

namespace headcount {
namespace {

// A value that does not fit its key; the loader adds the key, file and line.
struct ValueError {
  std::string message;
};

using Check = std::function<std::optional<std::string>(const void*)>;

struct Field {
  std::string key;
  std::string type;
  std::string help;
  std::function<void(Config&, const YAML::Node&)> set;
  std::function<YAML::Node(const Config&)> get;
};

std::string describe(const YAML::Node& n) {
  if (n.IsNull()) return "nothing";
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  return fmt::format("'{}'", n.Scalar());
}

template <typename T>
T convert(const YAML::Node& n);

template <>
long long convert<long long>(const YAML::Node& n) {
  if (!n.IsScalar()) throw ValueError{"expected an integer, got " + describe(n)};
  // Decimal digits with an optional sign, leading zeros included (YAML 1.2: 0100 is a hundred;
  // yaml-cpp would read it as octal 64), or 0x and hexadecimal digits.
  std::string_view text = n.Scalar();
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  unsigned long long magnitude = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
  if (text.empty() || r.ec == std::errc::invalid_argument || r.ptr != text.data() + text.size())
    throw ValueError{"expected an integer, got " + describe(n)};
  if (r.ec == std::errc::result_out_of_range ||
      magnitude > static_cast<unsigned long long>(INT64_MAX))
    throw ValueError{"integer out of range: " + describe(n)};
  const auto v = static_cast<long long>(magnitude);
  return negative ? -v : v;
}
template <>
int convert<int>(const YAML::Node& n) {
  const long long v = convert<long long>(n);
  if (v < INT32_MIN || v > INT32_MAX) throw ValueError{"integer out of range: " + describe(n)};
  return static_cast<int>(v);
}
template <>
double convert<double>(const YAML::Node& n) {
  if (!n.IsScalar()) throw ValueError{"expected a number, got " + describe(n)};
  try {
    const double v = n.as<double>();
    // Every range below is finite, but lists (prune.lambda_steps) have none: no number is NaN
    // or infinite.
    if (std::isnan(v)) throw ValueError{"expected a number, got " + describe(n) + " (NaN)"};
    if (std::isinf(v)) throw ValueError{"expected a finite number, got " + describe(n)};
    return v;
  } catch (const YAML::Exception&) {
    throw ValueError{"expected a number, got " + describe(n)};
  }
}
template <>
bool convert<bool>(const YAML::Node& n) {
  if (!n.IsScalar()) throw ValueError{"expected true or false, got " + describe(n)};
  try {
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    throw ValueError{"expected true or false, got " + describe(n)};
  }
}
template <>
std::string convert<std::string>(const YAML::Node& n) {
  if (!n.IsScalar()) throw ValueError{"expected a string, got " + describe(n)};
  return n.Scalar();
}
template <>
std::vector<std::string> convert<std::vector<std::string>>(const YAML::Node& n) {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) throw ValueError{"expected a list of strings, got " + describe(n)};
  std::vector<std::string> out;
  for (const auto& item : n) out.push_back(convert<std::string>(item));
  return out;
}

template <>
std::vector<double> convert<std::vector<double>>(const YAML::Node& n) {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) throw ValueError{"expected a list of numbers, got " + describe(n)};
  std::vector<double> out;
  for (const auto& item : n) out.push_back(convert<double>(item));
  return out;
}

template <typename T>
YAML::Node to_node(const T& v) {
  return YAML::Node(v);
}

// Shortest text that reads back to the same double ("0.0002", not "0.00020000000000000001").
template <>
YAML::Node to_node<double>(const double& v) {
  return YAML::Node(fmt::format("{}", v));
}

template <>
YAML::Node to_node<std::vector<double>>(const std::vector<double>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (double x : v) n.push_back(to_node(x));
  return n;
}

template <typename T>
using Validator = std::function<std::optional<std::string>(const T&)>;

template <typename T>
Validator<T> any() {
  return [](const T&) -> std::optional<std::string> { return std::nullopt; };
}

template <typename T>
Validator<T> range(T lo, T hi) {
  return [lo, hi](const T& v) -> std::optional<std::string> {
    if (v < lo || v > hi) return fmt::format("must be between {} and {}, got {}", lo, hi, v);
    return std::nullopt;
  };
}

// lo < v <= hi.
template <typename T>
Validator<T> above(T lo, T hi) {
  return [lo, hi](const T& v) -> std::optional<std::string> {
    if (!(v > lo) || v > hi)
      return fmt::format("must be greater than {} and at most {}, got {}", lo, hi, v);
    return std::nullopt;
  };
}

Validator<std::string> one_of(std::vector<std::string> choices) {
  return [choices](const std::string& v) -> std::optional<std::string> {
    for (const auto& c : choices) {
      if (c == v) return std::nullopt;
    }
    return fmt::format("expected one of {}, got '{}'", fmt::join(choices, ", "), v);
  };
}

Validator<std::vector<std::string>> subset_of(std::vector<std::string> choices) {
  return [choices](const std::vector<std::string>& v) -> std::optional<std::string> {
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::find(choices.begin(), choices.end(), v[i]) == choices.end()) {
        return fmt::format("expected a list of {}, got '{}'", fmt::join(choices, ", "), v[i]);
      }
      for (size_t k = 0; k < i; ++k) {
        if (v[k] == v[i]) return fmt::format("'{}' is listed twice", v[i]);
      }
    }
    return std::nullopt;
  };
}

// [enc_self, dec_self, enc_dec] head counts, or [] (off).
// Every element within [lo, hi] (and a whole number with `whole`).
Validator<std::vector<double>> each_in(double lo, double hi, bool whole) {
  return [lo, hi, whole](const std::vector<double>& v) -> std::optional<std::string> {
    for (double x : v) {
      if (x < lo || x > hi || (whole && x != std::floor(x)))
        return fmt::format("expected {}s between {} and {}, got {}",
                           whole ? "whole number" : "number", lo, hi, x);
    }
    return std::nullopt;
  };
}

Validator<std::vector<double>> heads_per_type() {
  return [](const std::vector<double>& v) -> std::optional<std::string> {
    if (v.empty()) return std::nullopt;
    if (v.size() != 3)
      return fmt::format(
          "expected [] or three head counts [enc_self, dec_self, enc_dec], got {} "
          "values",
          v.size());
    for (double x : v) {
      if (x < 0 || x != std::floor(x) || x > 1e6)
        return fmt::format("expected non-negative whole head counts, got {}", x);
    }
    return std::nullopt;
  };
}

Validator<std::string> non_empty() {
  return [](const std::string& v) -> std::optional<std::string> {
    if (v.empty()) return std::string("must not be empty");
    return std::nullopt;
  };
}

Validator<std::string> device_name() {
  return [](const std::string& v) -> std::optional<std::string> {
    static const std::regex re("auto|cpu|cuda(:[0-9]+)?");
    if (!std::regex_match(v, re)) {
      return fmt::format("expected auto, cpu, cuda or cuda:N, got '{}'", v);
    }
    return std::nullopt;
  };
}

template <typename T, typename Access>
Field field(std::string key, std::string type, Access access, Validator<T> validate,
            std::string help) {
  Field f;
  f.key = std::move(key);
  f.type = std::move(type);
  f.help = std::move(help);
  f.set = [access, validate](Config& c, const YAML::Node& n) {
    T v = convert<T>(n);
    if (auto err = validate(v)) throw ValueError{*err};
    access(c) = std::move(v);
  };
  f.get = [access](const Config& c) { return to_node(access(const_cast<Config&>(c))); };
  return f;
}

// A choice (include/headcount/common/choices.h): read from its name, written back as its name.
template <typename E, typename Access>
Field choice_field(std::string key, Access access, std::string help) {
  Field f;
  f.key = std::move(key);
  f.type = "string";
  f.help = std::move(help);
  f.set = [access](Config& c, const YAML::Node& n) {
    const auto name = convert<std::string>(n);
    const auto v = find_choice<E>(name);
    if (!v) throw ValueError{fmt::format("expected one of {}, got '{}'", choice_list<E>(), name)};
    access(c) = *v;
  };
  f.get = [access](const Config& c) {
    return YAML::Node(choice_name(access(const_cast<Config&>(c))));
  };
  return f;
}

#define HC_ACCESS(member)   \
  [](Config & c) -> auto& { \
    return c.member;        \
  }

// Keys of no section: the seed and the device.
std::vector<Field> general_fields() {
  return {
      field<int>("seed", "int", HC_ACCESS(seed), range(0, INT32_MAX),
                 "random seed for everything a run draws (data order, init, dropout, gates)"),
      field<std::string>("device", "string", HC_ACCESS(device), device_name(),
                         "auto (CUDA when present, else CPU), cpu, cuda or cuda:N"),
  };
}

// threads.*: LibTorch and OpenBLAS thread counts.
std::vector<Field> thread_fields() {
  return {
      field<int>(
          "threads.intra_op", "int", HC_ACCESS(threads.intra_op), range(-1, 1024),
          "LibTorch intra-op threads; 0 = one per core; -1 = auto (one with fp32 matrix "
          "products, whose OpenBLAS has its own threads; threads.blas, or one per core, with "
          "bf16)"),
      field<int>("threads.inter_op", "int", HC_ACCESS(threads.inter_op), range(1, 1024),
                 "LibTorch inter-op threads"),
      field<int>("threads.blas", "int", HC_ACCESS(threads.blas), range(0, 1024),
                 "OpenBLAS threads; 0 = one per core"),
  };
}

// data.*: the corpus files and their filtering.
std::vector<Field> data_fields() {
  return {
      field<std::string>("data.prepare", "string", HC_ACCESS(data.prepare),
                         one_of({"bible", "none"}),
                         "bible: build the default Spanish->English corpus into data.dir when "
                         "missing; none: the files must exist"),
      field<std::string>("data.dir", "path", HC_ACCESS(data.dir), non_empty(),
                         "folder of the corpus files; file names below are relative to it"),
      field<std::string>("data.src_lang", "string", HC_ACCESS(data.src_lang), non_empty(),
                         "source language code"),
      field<std::string>("data.tgt_lang", "string", HC_ACCESS(data.tgt_lang), non_empty(),
                         "target language code"),
      field<std::string>("data.train_src", "path", HC_ACCESS(data.train_src), non_empty(),
                         "training source file"),
      field<std::string>("data.train_tgt", "path", HC_ACCESS(data.train_tgt), non_empty(),
                         "training target file"),
      field<std::string>("data.dev_src", "path", HC_ACCESS(data.dev_src), non_empty(),
                         "development source file"),
      field<std::string>("data.dev_tgt", "path", HC_ACCESS(data.dev_tgt), non_empty(),
                         "development target file"),
      field<std::string>("data.test_src", "path", HC_ACCESS(data.test_src), non_empty(),
                         "test source file"),
      field<std::string>("data.test_tgt", "path", HC_ACCESS(data.test_tgt), non_empty(),
                         "test target file (first reference)"),
      field<std::vector<std::string>>(
          "data.test_extra_refs", "list of paths", HC_ACCESS(data.test_extra_refs),
          any<std::vector<std::string>>(), "further test references for multi-reference BLEU"),
      field<int>("data.min_tokens", "int", HC_ACCESS(data.min_tokens), range(0, 100000),
                 "drop training pairs with fewer whitespace tokens on either side"),
      field<int>("data.max_tokens", "int", HC_ACCESS(data.max_tokens), range(1, 100000),
                 "drop training pairs with more whitespace tokens on either side"),
      field<double>("data.max_length_ratio", "float", HC_ACCESS(data.max_length_ratio),
                    range(1.0, 1000.0),
                    "drop training pairs whose longer side has more than this many times the "
                    "tokens of the shorter"),
  };
}

// vocab.*: the SentencePiece models.
std::vector<Field> vocab_fields() {
  return {
      field<bool>("vocab.joint", "bool", HC_ACCESS(vocab.joint), any<bool>(),
                  "one SentencePiece model for source and target (needed to tie all embeddings)"),
      field<int>("vocab.size", "int", HC_ACCESS(vocab.size), range(16, 1000000),
                 "vocabulary size of each SentencePiece model"),
      field<std::string>("vocab.model_type", "string", HC_ACCESS(vocab.model_type),
                         one_of({"unigram", "bpe"}), "SentencePiece model type"),
      field<double>("vocab.character_coverage", "float", HC_ACCESS(vocab.character_coverage),
                    range(0.9, 1.0), "share of characters the vocabulary must cover"),
      field<bool>("vocab.byte_fallback", "bool", HC_ACCESS(vocab.byte_fallback), any<bool>(),
                  "unknown characters become byte pieces instead of <unk> (exact round trip)"),
      field<int>("vocab.input_sentence_size", "int", HC_ACCESS(vocab.input_sentence_size),
                 range(0, INT32_MAX), "sentences sampled to train SentencePiece; 0 = all"),
      field<std::string>("vocab.cache_dir", "path", HC_ACCESS(vocab.cache_dir), non_empty(),
                         "trained vocabularies are cached here, keyed by inputs and options"),
  };
}

// model.*: the Transformer's shape.
std::vector<Field> model_fields() {
  return {
      field<int>("model.d_model", "int", HC_ACCESS(model.d_model), range(8, 16384), "model width"),
      field<int>("model.ffn_dim", "int", HC_ACCESS(model.ffn_dim), range(8, 65536),
                 "feed-forward inner width"),
      field<int>("model.encoder_layers", "int", HC_ACCESS(model.encoder_layers), range(1, 64),
                 "encoder layers"),
      field<int>("model.decoder_layers", "int", HC_ACCESS(model.decoder_layers), range(1, 64),
                 "decoder layers"),
      field<int>("model.heads", "int", HC_ACCESS(model.heads), range(1, 256),
                 "attention heads per layer (before pruning)"),
      field<int>("model.head_dim", "int", HC_ACCESS(model.head_dim), range(0, 4096),
                 "width of one head; 0 = d_model / heads"),
      field<double>("model.dropout", "float", HC_ACCESS(model.dropout), range(0.0, 0.9),
                    "dropout on embeddings and sublayer outputs"),
      field<double>("model.attention_dropout", "float", HC_ACCESS(model.attention_dropout),
                    range(0.0, 0.9), "dropout on attention weights"),
      field<double>("model.activation_dropout", "float", HC_ACCESS(model.activation_dropout),
                    range(0.0, 0.9), "dropout after the feed-forward activation"),
      field<bool>("model.pre_norm", "bool", HC_ACCESS(model.pre_norm), any<bool>(),
                  "layer norm before each sublayer (true) or after the residual (false)"),
      field<bool>("model.tie_embeddings", "bool", HC_ACCESS(model.tie_embeddings), any<bool>(),
                  "share source, target and output embeddings (needs vocab.joint)"),
      choice_field<Activation>("model.activation", HC_ACCESS(model.activation),
                               "feed-forward nonlinearity (swish: Marian / OPUS-MT)"),
      choice_field<PositionLayout>(
          "model.positions", HC_ACCESS(model.positions),
          "sinusoid layout: interleaved sin/cos, or halves (sin first; fairseq, Marian)"),
      field<bool>("model.output_bias", "bool", HC_ACCESS(model.output_bias), any<bool>(),
                  "a learned bias on the output logits (Marian's final_logits_bias)"),
      field<int>("model.max_positions", "int", HC_ACCESS(model.max_positions), range(16, 100000),
                 "longest sequence the sinusoidal positions cover"),
  };
}

// train.*: the optimizer, its schedule, evaluation and checkpoints.
std::vector<Field> train_fields() {
  return {
      field<int>("train.max_tokens", "int", HC_ACCESS(train.max_tokens), range(16, 10000000),
                 "tokens per batch (sentences x padded length of the longer side)"),
      field<int>("train.update_freq", "int", HC_ACCESS(train.update_freq), range(1, 1024),
                 "batches accumulated per optimizer step"),
      field<double>("train.lr", "float", HC_ACCESS(train.lr), range(1e-7, 10.0),
                    "peak learning rate (end of warm-up); train.lr_schedule decides what follows"),
      choice_field<LrSchedule>(
          "train.lr_schedule", HC_ACCESS(train.lr_schedule),
          "after the warm-up: inverse square root decay, constant (fine-tuning), or "
          "cosine / linear decay to zero at train.max_steps (a converged end within "
          "a fixed budget)"),
      field<int>("train.warmup_steps", "int", HC_ACCESS(train.warmup_steps), range(0, 10000000),
                 "linear warm-up steps"),
      field<double>("train.warmup_init_lr", "float", HC_ACCESS(train.warmup_init_lr),
                    range(0.0, 10.0), "learning rate at step 0 of the warm-up"),
      field<double>("train.adam_beta1", "float", HC_ACCESS(train.adam_beta1), range(0.0, 0.99999),
                    "Adam beta1"),
      field<double>("train.adam_beta2", "float", HC_ACCESS(train.adam_beta2), range(0.0, 0.99999),
                    "Adam beta2"),
      field<double>("train.adam_eps", "float", HC_ACCESS(train.adam_eps), range(1e-20, 1.0),
                    "Adam epsilon (above 0: it keeps the update's division finite)"),
      field<double>("train.weight_decay", "float", HC_ACCESS(train.weight_decay), range(0.0, 1.0),
                    "Adam weight decay"),
      field<double>("train.label_smoothing", "float", HC_ACCESS(train.label_smoothing),
                    range(0.0, 0.9), "label smoothing of the cross-entropy"),
      field<double>("train.clip_norm", "float", HC_ACCESS(train.clip_norm), range(0.0, 1e6),
                    "clip the gradient norm to this; 0 = no clipping"),
      field<int>("train.max_steps", "int", HC_ACCESS(train.max_steps), range(1, INT32_MAX),
                 "optimizer steps at most"),
      field<int>("train.max_epochs", "int", HC_ACCESS(train.max_epochs), range(0, 1000000),
                 "epochs at most; 0 = no limit"),
      field<int>("train.max_len", "int", HC_ACCESS(train.max_len), range(2, 100000),
                 "drop training pairs longer than this many subwords on either side"),
      field<int>("train.eval_every", "int", HC_ACCESS(train.eval_every), range(1, INT32_MAX),
                 "optimizer steps between dev evaluations (and checkpoints)"),
      field<int>("train.save_every", "int", HC_ACCESS(train.save_every), range(0, INT32_MAX),
                 "steps between extra saves of checkpoints/last, at the next log line (a "
                 "killed run loses about this many); 0 = at evaluations only"),
      field<int>("train.eval_beam", "int", HC_ACCESS(train.eval_beam), range(1, 64),
                 "beam size of the dev BLEU evaluation (1 = greedy)"),
      field<int>("train.eval_max_sentences", "int", HC_ACCESS(train.eval_max_sentences),
                 range(0, INT32_MAX), "dev sentences decoded for BLEU; 0 = all"),
      choice_field<BestMetric>("train.best_metric", HC_ACCESS(train.best_metric),
                               "what picks the best checkpoint"),
      field<int>("train.patience", "int", HC_ACCESS(train.patience), range(0, 1000000),
                 "stop after this many evaluations without improvement; 0 = never"),
      field<int>("train.keep_last", "int", HC_ACCESS(train.keep_last), range(0, 1000000),
                 "step-N checkpoints kept besides last and best"),
      field<int>("train.log_every", "int", HC_ACCESS(train.log_every), range(1, INT32_MAX),
                 "optimizer steps between log lines"),
      field<std::string>("train.precision", "string", HC_ACCESS(train.precision),
                         one_of({"auto", "fp32", "bf16"}),
                         "auto | fp32 | bf16: bf16 matrix products with fp32 weights, optimizer, "
                         "loss, norms, softmax and gates (bf16 needs avx512_bf16/AMX on CPU); auto "
                         "= bf16 where the hardware has it (replaces train.bf16)"),
  };
}

// decode.*: beam search.
std::vector<Field> decode_fields() {
  return {
      field<int>("decode.beam", "int", HC_ACCESS(decode.beam), range(1, 256), "beam size"),
      field<double>("decode.length_penalty", "float", HC_ACCESS(decode.length_penalty),
                    range(0.0, 10.0), "GNMT length penalty alpha; 0 = none"),
      field<double>("decode.max_len_offset", "float", HC_ACCESS(decode.max_len_offset),
                    range(0.0, 100000.0), "maximum output length = offset + ratio x source length"),
      field<double>("decode.max_len_ratio", "float", HC_ACCESS(decode.max_len_ratio),
                    range(0.0, 1000.0), "see decode.max_len_offset"),
      field<int>("decode.batch_size", "int", HC_ACCESS(decode.batch_size), range(1, 100000),
                 "sentences decoded together"),
      field<std::string>(
          "decode.precision", "string", HC_ACCESS(decode.precision),
          one_of({"auto", "fp32", "bf16"}),
          "auto | fp32 | bf16 for decoding (translate, eval, dev BLEU, analyses), as "
          "train.precision"),
  };
}

// prune.* of L0 pruning: the gates, the penalty and its schedule.
std::vector<Field> prune_gate_fields() {
  return {
      field<std::string>("prune.init_from", "path", HC_ACCESS(prune.init_from), any<std::string>(),
                         "converged checkpoint to fine-tune with gates (required by prune)"),
      field<std::vector<std::string>>("prune.attention", "list", HC_ACCESS(prune.attention),
                                      subset_of({"enc_self", "dec_self", "enc_dec"}),
                                      "attention types that get gates"),
      field<std::vector<std::string>>("prune.train_parts", "list", HC_ACCESS(prune.train_parts),
                                      subset_of({"encoder", "decoder", "embeddings"}),
                                      "parts trained besides the gates; [] = gates only"),
      field<double>("prune.lambda", "float", HC_ACCESS(prune.lambda), range(0.0, 1e6),
                    "coefficient of the L0 penalty (constant and linear schedules)"),
      choice_field<LambdaScheduleKind>("prune.lambda_schedule", HC_ACCESS(prune.lambda_schedule),
                                       "how lambda changes with the step"),
      field<int>("prune.lambda_warmup_steps", "int", HC_ACCESS(prune.lambda_warmup_steps),
                 range(0, INT32_MAX), "linear schedule: steps from 0 to prune.lambda"),
      field<std::vector<double>>("prune.lambda_steps", "list of numbers",
                                 HC_ACCESS(prune.lambda_steps), each_in(0, INT32_MAX, true),
                                 "piecewise schedule: change points"),
      field<std::vector<double>>("prune.lambda_values", "list of numbers",
                                 HC_ACCESS(prune.lambda_values), each_in(0, 1e6, false),
                                 "piecewise schedule: values from each change point"),
      choice_field<PenaltyNorm>(
          "prune.penalty_norm", HC_ACCESS(prune.penalty_norm),
          "sum of P_open over heads (paper) or mean over gated layers (Voita's code)"),
      field<int>("prune.target_heads", "int", HC_ACCESS(prune.target_heads), range(0, 1000000),
                 "keep exactly this many gated heads (Lagrangian target mode); 0 = off"),
      choice_field<TargetSplit>(
          "prune.target_split", HC_ACCESS(prune.target_split),
          "one target over several types: the largest log_alpha over all (top) or each type's "
          "share of the expected open heads (expected)"),
      field<double>("prune.split_floor", "float", HC_ACCESS(prune.split_floor), range(0.0, 1.0),
                    "target_split expected: heads with P_open below this count as closed when "
                    "the total is split between the types (0 = every head counts)"),
      field<int>("prune.target_warmup_steps", "int", HC_ACCESS(prune.target_warmup_steps),
                 range(0, INT32_MAX), "steps over which the target is ramped"),
      field<double>("prune.lagrangian_lr", "float", HC_ACCESS(prune.lagrangian_lr),
                    range(0.0, 100.0),
                    "learning rate of the Lagrange multipliers (gradient ascent)"),
      field<int>("prune.recovery_steps", "int", HC_ACCESS(prune.recovery_steps),
                 range(0, INT32_MAX),
                 "the last N of train.max_steps train with the final mask fixed (0 = off)"),
      field<bool>("prune.fix_at_target", "bool", HC_ACCESS(prune.fix_at_target), any<bool>(),
                  "target mode with recovery: fix the mask when E[open heads] reaches the target"),
      field<bool>("prune.exact_recovery", "bool", HC_ACCESS(prune.exact_recovery), any<bool>(),
                  "with fix_at_target: end the run exactly recovery_steps steps after the mask "
                  "is fixed"),
      field<bool>("prune.rewind", "bool", HC_ACCESS(prune.rewind), any<bool>(),
                  "with recovery: when the mask is fixed, restart from prune.init_from's weights "
                  "(fresh optimizer, warm-up again) and fine-tune them under it"),
      field<bool>("prune.freeze_until_fixed", "bool", HC_ACCESS(prune.freeze_until_fixed),
                  any<bool>(),
                  "with recovery: only the gates train until the mask is fixed; the weights "
                  "(prune.train_parts) train after it"),
      field<std::vector<double>>(
          "prune.gate_seeds", "list of numbers", HC_ACCESS(prune.gate_seeds),
          each_in(0, INT32_MAX, true),
          "target mode with fix_at_target: choose the mask by the mean P_open of one gate run "
          "per seed (RUN/gate-seeds/seed-S), then recover under it; [] = the run's own gates"),
      field<bool>("prune.stop_at_fix", "bool", HC_ACCESS(prune.stop_at_fix), any<bool>(),
                  "end the run at the step its mask is fixed (the gated steps only)"),
      field<double>("prune.distill_weight", "float", HC_ACCESS(prune.distill_weight),
                    range(0.0, 1.0),
                    "weight of distillation from the unpruned model in the objective (0 = off)"),
      field<double>("prune.distill_temperature", "float", HC_ACCESS(prune.distill_temperature),
                    range(1e-3, 100.0), "softmax temperature of the distillation term"),
      field<double>("prune.gate_lr", "float", HC_ACCESS(prune.gate_lr), range(0.0, 100.0),
                    "Adam learning rate of the gates (constant)"),
      field<double>("prune.temperature", "float", HC_ACCESS(prune.temperature), range(1e-3, 100.0),
                    "Hard-Concrete temperature beta (Voita's code 0.33; Louizos, CoFi 2/3)"),
      field<double>("prune.stretch_low", "float", HC_ACCESS(prune.stretch_low), range(-10.0, -1e-6),
                    "Hard-Concrete stretch limit l"),
      field<double>("prune.stretch_high", "float", HC_ACCESS(prune.stretch_high),
                    range(1.000001, 10.0), "Hard-Concrete stretch limit r"),
      field<double>("prune.init_log_alpha", "float", HC_ACCESS(prune.init_log_alpha),
                    range(-100.0, 100.0),
                    "initial log_alpha; >= ln((1-l)/(r-1)) leaves the converged model unchanged"),
      choice_field<GateNoise>("prune.noise", HC_ACCESS(prune.noise),
                              "one gate draw per head per optimizer step, or per head per example"),
  };
}

// prune.method and the keys of Fisher pruning.
std::vector<Field> prune_fisher_fields() {
  return {
      choice_field<PruneMethod>(
          "prune.method", HC_ACCESS(prune.method),
          "l0 (gated fine-tuning) | fisher (post-training Fisher masks, Kwon et "
          "al. 2022: minutes, no fine-tuning)"),
      field<std::vector<double>>(
          "prune.target_heads_per_type", "list of numbers", HC_ACCESS(prune.target_heads_per_type),
          heads_per_type(),
          "heads to keep per attention type [enc_self, dec_self, enc_dec] (fisher's budget, or "
          "l0's target mode with one Lagrangian per type; an ungated type's entry is its "
          "count); [] = off"),
      field<double>("prune.flops_fraction", "float", HC_ACCESS(prune.flops_fraction),
                    range(0.0, 1.0),
                    "fisher: keep at most this fraction of decoding FLOPs; 0 = off"),
      field<double>("prune.latency_fraction", "float", HC_ACCESS(prune.latency_fraction),
                    range(0.0, 1.0),
                    "fisher: keep at most this fraction of the decoding latency measured on this "
                    "machine (a linear model per attention type); 0 = off"),
      field<int>("prune.calibration_sentences", "int", HC_ACCESS(prune.calibration_sentences),
                 range(1, INT32_MAX),
                 "fisher: training sentences (teacher-forced) for the Fisher estimate and refit"),
      field<bool>("prune.rearrange", "bool", HC_ACCESS(prune.rearrange), any<bool>(),
                  "fisher: re-choose each layer's kept heads with the layer's full Fisher block"),
      field<bool>("prune.reconstruct", "bool", HC_ACCESS(prune.reconstruct), any<bool>(),
                  "fisher: refit each pruned layer's output projection by least squares"),
      choice_field<ReconstructMode>(
          "prune.reconstruct_mode", HC_ACCESS(prune.reconstruct_mode),
          "fisher: one_pass (refit from the unpruned model's activations) | sequential (layer by "
          "layer from the pruned model's own inputs, toward each layer's unpruned output) | "
          "sequential_stream (the same, toward the unpruned residual stream)"),
      field<bool>("prune.reconstruct_every_layer", "bool", HC_ACCESS(prune.reconstruct_every_layer),
                  any<bool>(),
                  "fisher, sequential modes: also refit the layers that kept every head (toward "
                  "the same target, correcting the drift of the pruned layers before them)"),
      field<double>("prune.ridge", "float", HC_ACCESS(prune.ridge), above(0.0, 1e6),
                    "fisher: ridge of the refit, relative to the mean diagonal of the Gram matrix"),
  };
}

// Every key, in the order `config show` and error messages list them.
const std::vector<Field>& schema() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> all;
    for (auto section : {general_fields, thread_fields, data_fields, vocab_fields, model_fields,
                         train_fields, decode_fields, prune_gate_fields, prune_fisher_fields}) {
      const std::vector<Field> some = section();
      all.insert(all.end(), some.begin(), some.end());
    }
    return all;
  }();
  return fields;
}

#undef HC_ACCESS

const Field* find_field(const std::string& key) {
  for (const auto& f : schema()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

bool is_section(const std::string& prefix) {
  for (const auto& f : schema()) {
    if (f.key.size() > prefix.size() && f.key.compare(0, prefix.size(), prefix) == 0 &&
        f.key[prefix.size()] == '.') {
      return true;
    }
  }
  return false;
}

std::string closest_key(const std::string& key) {
  std::string best;
  size_t best_d = SIZE_MAX;
  const std::string last = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
  for (const auto& f : schema()) {
    size_t d = text::edit_distance(key, f.key);
    const std::string flast =
        f.key.substr(f.key.rfind('.') == std::string::npos ? 0 : f.key.rfind('.') + 1);
    // A right leaf name in the wrong section is a close match too.
    if (flast == last) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = f.key;
    }
  }
  return best_d <= std::max<size_t>(3, key.size() / 3) ? best : "";
}

std::string unknown_key_message(const std::string& key) {
  const std::string hint = closest_key(key);
  if (!hint.empty()) return fmt::format("unknown key '{}'; did you mean '{}'?", key, hint);
  return fmt::format("unknown key '{}' (headcount config keys lists the valid ones)", key);
}

std::string location(const std::string& origin, const YAML::Node& n) {
  if (n.Mark().is_null()) return origin;
  return fmt::format("{}:{}", origin, n.Mark().line + 1);
}

// train.bf16 was replaced by train.precision; it stays readable so that the config.yaml of older
// run folders and checkpoints (which say train.bf16: false) still loads, with its old meaning.
constexpr const char* kReplacedBf16Key = "train.bf16";

void set_replaced_bf16(Config& config, std::map<std::string, std::string>& origins,
                       const YAML::Node& value, const std::string& where) {
  bool bf16 = false;
  try {
    bf16 = convert<bool>(value);
  } catch (const ValueError& e) {
    HC_FAIL("{}: {}: {} (train.bf16 is now train.precision: auto | fp32 | bf16)", where,
            kReplacedBf16Key, e.message);
  }
  config.train.precision = bf16 ? "bf16" : "fp32";
  origins["train.precision"] = where + " (as train.bf16)";
}

void apply_node(Config& config, std::map<std::string, std::string>& origins, const YAML::Node& node,
                const std::string& prefix, const std::string& origin) {
  if (!node.IsMap()) {
    HC_FAIL("{}: expected a mapping of config keys{}, got {}", location(origin, node),
            prefix.empty() ? "" : fmt::format(" under '{}'", prefix), describe(node));
  }
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    const YAML::Node& value = kv.second;
    if (key == kReplacedBf16Key) {
      set_replaced_bf16(config, origins, value, location(origin, kv.first));
      continue;
    }
    if (const Field* f = find_field(key)) {
      try {
        f->set(config, value);
      } catch (const ValueError& e) {
        HC_FAIL("{}: {}: {}", location(origin, kv.first), key, e.message);
      }
      origins[key] = location(origin, kv.first);
    } else if (is_section(key)) {
      if (value.IsNull()) continue;  // "data:" with nothing under it
      if (!value.IsMap()) {
        HC_FAIL("{}: '{}' is a section: expected a mapping of its keys, got {}",
                location(origin, kv.first), key, describe(value));
      }
      apply_node(config, origins, value, key, origin);
    } else {
      HC_FAIL("{}: {}", location(origin, kv.first), unknown_key_message(key));
    }
  }
}

// yaml-cpp shares an aliased node instead of copying it, but every walk over the tree visits it
// once per alias: nested aliases ("billion laughs") make a few lines into billions of nodes. A
// walk counts what it visits; a file within kMaxConfigBytes without aliases has fewer nodes
// than bytes, so only alias expansion can reach the limit.
constexpr size_t kMaxYamlNodes = io::kMaxConfigBytes;

void check_unique_keys(const YAML::Node& node, const std::string& origin, size_t& visited) {
  if (++visited > kMaxYamlNodes) {
    HC_FAIL(
        "{}: more than {} YAML nodes once aliases are expanded: nested aliases (*name) are "
        "not a config",
        location(origin, node), kMaxYamlNodes);
  }
  if (node.IsSequence()) {
    for (const auto& item : node) check_unique_keys(item, origin, visited);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, std::string> seen;  // key -> where it was first given
  for (const auto& kv : node) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (!name.empty()) {
      const auto [it, fresh] = seen.emplace(name, location(origin, kv.first));
      if (!fresh) {
        HC_FAIL("{}: key '{}' given twice (first at {}): give each key once",
                location(origin, kv.first), name, it->second);
      }
    }
    check_unique_keys(kv.second, origin, visited);
  }
}

}  // namespace

void check_unique_keys(const YAML::Node& node, const std::string& origin) {
  size_t visited = 0;
  check_unique_keys(node, origin, visited);
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    HC_FAIL("{}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  check_unique_keys(root, origin);
  return root;
}

std::vector<ConfigKeyInfo> config_keys() {
  const Config defaults;
  std::vector<ConfigKeyInfo> out;
  for (const auto& f : schema()) {
    YAML::Emitter em;
    em.SetSeqFormat(YAML::Flow);
    em << f.get(defaults);
    out.push_back({f.key, f.type, f.help, em.c_str()});
  }
  return out;
}

ConfigLoader::ConfigLoader() {
  for (const auto& f : schema()) origins_[f.key] = "default";
}

void ConfigLoader::apply_yaml_text(const std::string& yaml_text, const std::string& origin) {
  const YAML::Node root = parse_yaml(yaml_text, origin);
  if (root.IsNull()) return;  // an empty file changes nothing
  apply_node(config_, origins_, root, "", origin);
}

void ConfigLoader::apply_file(const fs::path& path) {
  std::error_code ec;
  HC_CHECK(fs::exists(path, ec), "config file {} not found", path.string());
  HC_CHECK(!fs::is_directory(path, ec), "{}: is a folder, expected a YAML config file",
           path.string());
  apply_yaml_text(io::read_file_bounded(path, io::kMaxConfigBytes, "a YAML config file"),
                  path.string());
}

void ConfigLoader::apply_set(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  HC_CHECK(eq != std::string::npos && eq > 0, "--set {}: expected key=value, e.g. vocab.size=4000",
           assignment);
  const std::string key = text::trim(assignment.substr(0, eq));
  const std::string value = assignment.substr(eq + 1);
  const std::string origin = fmt::format("--set {}", assignment);
  if (key == kReplacedBf16Key) {
    YAML::Node node;
    try {
      node = YAML::Load(value);
    } catch (const YAML::ParserException& e) {
      HC_FAIL("{}: cannot parse the value: {}", origin, e.msg);
    }
    set_replaced_bf16(config_, origins_, node, origin);
    return;
  }
  const Field* f = find_field(key);
  if (!f) HC_FAIL("{}: {}", origin, unknown_key_message(key));
  YAML::Node node;
  try {
    node = YAML::Load(value);
  } catch (const YAML::ParserException& e) {
    HC_FAIL("{}: cannot parse the value: {}", origin, e.msg);
  }
  try {
    f->set(config_, node);
  } catch (const ValueError& e) {
    HC_FAIL("{}: {}: {}", origin, key, e.message);
  }
  origins_[key] = "--set";
}

void ConfigLoader::apply_flag(const FlagOverride& flag) {
  const Field* f = find_field(flag.key);
  HC_CHECK(f, "{}: unknown config key '{}'", flag.flag, flag.key);
  const std::string problem = config_value_problem(flag.key, flag.value);
  HC_CHECK(problem.empty(), "{} {}: {}", flag.flag, flag.value, problem);
  f->set(config_, YAML::Load(flag.value));
  origins_[flag.key] = flag.flag;
}

std::string config_value_problem(const std::string& key, const std::string& value) {
  const Field* f = find_field(key);
  if (!f) return unknown_key_message(key);
  YAML::Node node;
  try {
    node = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    return fmt::format("{}: cannot parse '{}': {}", key, value, e.msg);
  }
  Config scratch;
  try {
    f->set(scratch, node);
  } catch (const ValueError& e) {
    return fmt::format("{}: {}", key, e.message);
  }
  return "";
}

std::string ConfigLoader::origin(const std::string& key) const {
  const auto it = origins_.find(key);
  return it == origins_.end() ? "" : it->second;
}

namespace {

// prune.method fisher takes exactly one budget; l0 takes at most one target and no cost budget.
void check_prune_budgets(const PruneConfig& p, const ConfigLoader& loader) {
  const auto origin = [&](const std::string& key) { return loader.origin(key); };
  const int budgets = (p.target_heads > 0) + !p.target_heads_per_type.empty() +
                      (p.flops_fraction > 0) + (p.latency_fraction > 0);
  if (p.method == PruneMethod::kFisher) {
    HC_CHECK(budgets == 1,
             "prune.method fisher (from {}) needs exactly one budget: prune.target_heads (from "
             "{}), prune.target_heads_per_type (from {}), prune.flops_fraction (from {}) or "
             "prune.latency_fraction (from {}); {} are set",
             origin("prune.method"), origin("prune.target_heads"),
             origin("prune.target_heads_per_type"), origin("prune.flops_fraction"),
             origin("prune.latency_fraction"), budgets);
  } else {
    HC_CHECK(p.flops_fraction == 0 && p.latency_fraction == 0,
             "prune.flops_fraction (from {}) and prune.latency_fraction (from {}) are budgets of "
             "prune.method fisher, but prune.method is {} (from {})",
             origin("prune.flops_fraction"), origin("prune.latency_fraction"),
             choice_name(p.method), origin("prune.method"));
    HC_CHECK(p.target_heads == 0 || p.target_heads_per_type.empty(),
             "prune.target_heads ({}, from {}) and prune.target_heads_per_type (from {}) are two "
             "targets of the gates: give one (prune.target_heads=0 or "
             "prune.target_heads_per_type=[] turns the other off)",
             p.target_heads, origin("prune.target_heads"), origin("prune.target_heads_per_type"));
  }
  // The split of one total between the types is a rule of the gates' final mask. With a count per
  // type, or with one gated type, there is no total to split: it keeps what `top` keeps (so that a
  // recipe file's `expected` holds for those runs too).
  HC_CHECK(p.target_split == TargetSplit::kTop ||
               (p.method == PruneMethod::kL0 &&
                (p.target_heads > 0 || !p.target_heads_per_type.empty())),
           "prune.target_split {} (from {}) splits target mode's total between the gated types by "
           "the gates' expected open heads: it needs prune.method l0 (from {}) and a target, "
           "prune.target_heads or prune.target_heads_per_type (from {}); lambda mode's mask is "
           "the gates' own (prune.target_split=top)",
           choice_name(p.target_split), origin("prune.target_split"), origin("prune.method"),
           origin("prune.target_heads"));
  HC_CHECK(p.split_floor == 0 || p.target_split == TargetSplit::kExpected,
           "prune.split_floor {} (from {}) is a rule of prune.target_split expected (which of the "
           "gates' expected open heads count when the total is split between the types), but "
           "prune.target_split is {} (from {}): set prune.target_split=expected or "
           "prune.split_floor=0",
           p.split_floor, origin("prune.split_floor"), choice_name(p.target_split),
           origin("prune.target_split"));
}

}  // namespace

Config ConfigLoader::finish() const {
  const Config& c = config_;
  const int head_dim = c.model.head_dim > 0 ? c.model.head_dim : c.model.d_model / c.model.heads;
  HC_CHECK(c.model.head_dim > 0 || c.model.d_model % c.model.heads == 0,
           "model.d_model ({}, from {}) is not divisible by model.heads ({}, from {}): set "
           "model.head_dim",
           c.model.d_model, origin("model.d_model"), c.model.heads, origin("model.heads"));
  HC_CHECK(head_dim > 0, "model.head_dim must be positive");
  HC_CHECK(!c.model.tie_embeddings || c.vocab.joint,
           "model.tie_embeddings (from {}) needs one joint vocabulary, but vocab.joint is false "
           "(from {})",
           origin("model.tie_embeddings"), origin("vocab.joint"));
  HC_CHECK(c.data.min_tokens <= c.data.max_tokens,
           "data.min_tokens ({}, from {}) is larger than data.max_tokens ({}, from {})",
           c.data.min_tokens, origin("data.min_tokens"), c.data.max_tokens,
           origin("data.max_tokens"));
  HC_CHECK(c.train.max_len < c.model.max_positions,
           "train.max_len ({}, from {}) must be below model.max_positions ({}, from {}): a kept "
           "training pair and its end token must fit the position table",
           c.train.max_len, origin("train.max_len"), c.model.max_positions,
           origin("model.max_positions"));
  const auto& p = c.prune;
  check_prune_budgets(p, *this);
  HC_CHECK(!p.reconstruct_every_layer ||
               (p.reconstruct && p.reconstruct_mode != ReconstructMode::kOnePass),
           "prune.reconstruct_every_layer (from {}) needs prune.reconstruct on and a sequential "
           "prune.reconstruct_mode (from {}): one_pass refits every layer from the unpruned "
           "model's activations, where a layer that kept its heads is already its own fit",
           origin("prune.reconstruct_every_layer"), origin("prune.reconstruct_mode"));
  HC_CHECK(p.method == PruneMethod::kL0 || (p.recovery_steps == 0 && !p.rewind),
           "prune.recovery_steps ({}, from {}) and prune.rewind ({}, from {}) are settings of the "
           "gated fine-tuning (prune.method l0), but prune.method is {} (from {}): set "
           "prune.recovery_steps=0 and prune.rewind=false (configs/bible-prune-gated.yaml after "
           "configs/bible-prune.yaml does)",
           p.recovery_steps, origin("prune.recovery_steps"), p.rewind, origin("prune.rewind"),
           choice_name(p.method), origin("prune.method"));
  HC_CHECK(p.recovery_steps < c.train.max_steps,
           "prune.recovery_steps ({}, from {}) must be below train.max_steps ({}, from {}): the "
           "gates train in the steps before it",
           p.recovery_steps, origin("prune.recovery_steps"), c.train.max_steps,
           origin("train.max_steps"));
  HC_CHECK(!p.fix_at_target ||
               ((p.target_heads > 0 || !p.target_heads_per_type.empty()) && p.recovery_steps > 0),
           "prune.fix_at_target (from {}) fixes the mask of target mode early for the recovery "
           "steps: it needs prune.target_heads or prune.target_heads_per_type (from {}) and "
           "prune.recovery_steps (from {})",
           origin("prune.fix_at_target"), origin("prune.target_heads"),
           origin("prune.recovery_steps"));
  HC_CHECK(!p.exact_recovery || p.fix_at_target,
           "prune.exact_recovery (from {}) ends the run recovery_steps after the mask is fixed "
           "at the target: it needs prune.fix_at_target (from {})",
           origin("prune.exact_recovery"), origin("prune.fix_at_target"));
  HC_CHECK(!p.rewind || p.recovery_steps > 0,
           "prune.rewind (from {}) restarts the weights when the mask is fixed for the recovery "
           "steps: it needs prune.recovery_steps (from {})",
           origin("prune.rewind"), origin("prune.recovery_steps"));
  HC_CHECK(!p.freeze_until_fixed || p.recovery_steps > 0,
           "prune.freeze_until_fixed (from {}) trains the weights only after the mask is fixed "
           "for the recovery steps: it needs prune.recovery_steps (from {}), or the weights "
           "would never train",
           origin("prune.freeze_until_fixed"), origin("prune.recovery_steps"));
  HC_CHECK(!p.stop_at_fix || p.recovery_steps > 0,
           "prune.stop_at_fix (from {}) ends the run when its mask is fixed: it needs "
           "prune.recovery_steps (from {}), which sets the latest fixing point",
           origin("prune.stop_at_fix"), origin("prune.recovery_steps"));
  if (!p.gate_seeds.empty()) {
    HC_CHECK(p.fix_at_target && p.exact_recovery && p.rewind && !p.stop_at_fix,
             "prune.gate_seeds (from {}) chooses the mask from several gate runs and fine-tunes "
             "prune.init_from under it for exactly prune.recovery_steps: it needs "
             "prune.fix_at_target (from {}), prune.exact_recovery (from {}) and prune.rewind (from "
             "{}) true and prune.stop_at_fix (from {}) false (configs/bible-prune-target.yaml "
             "has the first three; one gate seed, the mask from the run's own gates: --set "
             "\"prune.gate_seeds=[]\")",
             origin("prune.gate_seeds"), origin("prune.fix_at_target"),
             origin("prune.exact_recovery"), origin("prune.rewind"), origin("prune.stop_at_fix"));
    std::set<double> seen;
    for (double s : p.gate_seeds)
      HC_CHECK(seen.insert(s).second,
               "prune.gate_seeds (from {}) lists seed {} twice: each gate run needs its own seed",
               origin("prune.gate_seeds"), static_cast<int64_t>(s));
  }
  HC_CHECK(p.distill_weight == 0 || p.method == PruneMethod::kL0,
           "prune.distill_weight (from {}) is a setting of the gated fine-tuning (prune.method "
           "l0), but prune.method is {} (from {})",
           origin("prune.distill_weight"), choice_name(p.method), origin("prune.method"));
  return c;
}

std::string config_value(const Config& config, const std::string& key) {
  const Field* f = find_field(key);
  HC_CHECK(f, "unknown config key '{}'", key);
  YAML::Emitter em;
  em.SetSeqFormat(YAML::Flow);
  em << f->get(config);
  return em.c_str();
}

std::vector<std::string> changed_keys(const Config& a, const Config& b) {
  std::vector<std::string> out;
  for (const auto& f : schema()) {
    if (config_value(a, f.key) != config_value(b, f.key)) out.push_back(f.key);
  }
  return out;
}

std::string dump_config(const Config& config) {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& f : schema()) {
    YAML::Node node;
    node.reset(root);
    size_t start = 0;
    for (;;) {
      const size_t dot = f.key.find('.', start);
      if (dot == std::string::npos) {
        node[f.key.substr(start)] = f.get(config);
        break;
      }
      YAML::Node child = node[f.key.substr(start, dot - start)];
      node.reset(child);
      start = dot + 1;
    }
  }
  YAML::Emitter em;
  em.SetSeqFormat(YAML::Flow);
  em << root;
  return std::string(em.c_str()) + "\n";
}

void save_config(const Config& config, const fs::path& path) {
  io::write_file_atomic(path, dump_config(config));
}

Config load_config_file(const fs::path& path) {
  ConfigLoader loader;
  loader.apply_file(path);
  return loader.finish();
}

Config with_overrides(const Config& config, const std::string& origin,
                      const std::vector<std::string>& sets,
                      const std::vector<FlagOverride>& flags) {
  if (sets.empty() && flags.empty()) return config;
  // model.*, vocab.*, train.*, prune.* and seed describe the weights and how they were made:
  // changed here they would be ignored, or describe another model than the one loaded.
  for (const auto& a : sets) {
    const std::string key = text::trim(a.substr(0, a.find('=')));
    const bool allowed = key.rfind("decode.", 0) == 0 || key.rfind("threads.", 0) == 0 ||
                         key.rfind("data.", 0) == 0 || key == "device";
    HC_CHECK(allowed,
             "--set {}: the checkpoint's {} says how its weights were made; only decode.*, "
             "threads.*, data.* and device can be changed for it",
             a, key);
  }
  ConfigLoader loader;
  loader.apply_yaml_text(dump_config(config), origin);
  for (const auto& a : sets) loader.apply_set(a);
  for (const auto& f : flags) loader.apply_flag(f);
  return loader.finish();
}

bool overrides_key(const std::vector<std::string>& sets, const std::string& key) {
  for (const auto& s : sets) {
    const size_t eq = s.find('=');
    if (eq != std::string::npos && text::trim(s.substr(0, eq)) == key) return true;
  }
  return false;
}

fs::path data_path(const DataConfig& data, const std::string& name) {
  const fs::path p(name);
  return p.is_absolute() ? p : fs::path(data.dir) / p;
}

}  // namespace headcount
