// The typed configuration of every headcount command. YAML becomes these structs in exactly one
// place (src/common/config.cpp); nothing else sees a YAML node or a key string.
//
// Precedence: defaults < config file(s), in the order given < `--set key=value` overrides.
// Unknown keys, wrong types and out-of-range values are errors naming the key, the file and the
// line, with the closest valid key suggested.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "headcount/common/choices.h"

namespace headcount {

namespace fs = std::filesystem;

struct ThreadsConfig {
  // Chosen by measurement on the 2-core machines (`headcount bench threads`; the figures are in
  // experiments/threads/README.md): one LibTorch thread with an OpenBLAS thread per core is the
  // fastest fp32 setting there; more LibTorch threads beside OpenBLAS's oversubscribe the cores.
  // LibTorch intra-op (OpenMP) threads; 0 = one per core; -1 = auto: one when the matrix products
  // run in fp32 (OpenBLAS has its own threads), one per core in bf16 (oneDNN runs on these).
  int intra_op = -1;
  int inter_op = 1;  // LibTorch inter-op threads
  int blas = 0;      // OpenBLAS threads (openblas_set_num_threads); 0 = one per core
};

struct DataConfig {
  // "bible": build the default Spanish->English corpus into `dir` when its files are missing;
  // "none": the files must exist.
  std::string prepare = "bible";
  std::string dir = "data/bible";
  std::string src_lang = "es";
  std::string tgt_lang = "en";
  // File names are relative to `dir` unless absolute.
  std::string train_src = "train.es";
  std::string train_tgt = "train.en";
  std::string dev_src = "dev.es";
  std::string dev_tgt = "dev.en";
  std::string test_src = "test.es";
  std::string test_tgt = "test.en";
  std::vector<std::string> test_extra_refs = {"test.kjv.en"};
  // Length filtering of the training pairs (whitespace tokens per side). Dev and test are never
  // filtered.
  int min_tokens = 1;
  int max_tokens = 250;
  double max_length_ratio = 3.0;
};

struct VocabConfig {
  bool joint = true;                   // one model for both sides (tied embeddings need it)
  int size = 8000;                     // per model
  std::string model_type = "unigram";  // unigram | bpe
  double character_coverage = 1.0;
  // Unknown characters become UTF-8 byte pieces instead of <unk>, so decoding gives back any
  // input exactly (costs 256 pieces of the vocabulary).
  bool byte_fallback = true;
  int input_sentence_size = 0;  // 0: train on every sentence
  std::string cache_dir = "data/vocab";
};

struct ModelConfig {
  int d_model = 256;
  int ffn_dim = 1024;
  int encoder_layers = 6;
  int decoder_layers = 6;
  int heads = 8;     // per attention layer, before any pruning
  int head_dim = 0;  // 0 = d_model / heads
  double dropout = 0.1;
  double attention_dropout = 0.0;
  double activation_dropout = 0.0;
  bool pre_norm = false;       // false: post-norm as Vaswani et al.
  bool tie_embeddings = true;  // source, target and output share one matrix (joint vocabulary)
  int max_positions = 1024;
  // Variants of imported models (defaults: the models headcount trains).
  Activation activation = Activation::kRelu;
  PositionLayout positions = PositionLayout::kInterleaved;
  bool output_bias = false;  // a learned bias on the output logits (Marian's final_logits_bias)
};

struct TrainConfig {
  int max_tokens = 4096;  // per batch: sentences x padded length, on the longer side
  int update_freq = 1;    // gradient accumulation: batches per optimizer step
  double lr = 7e-4;       // peak learning rate, reached at the end of the warm-up
  LrSchedule lr_schedule = LrSchedule::kInverseSqrt;  // after the warm-up
  int warmup_steps = 4000;
  double warmup_init_lr = 1e-7;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.98;
  double adam_eps = 1e-9;
  double weight_decay = 0.0;
  double label_smoothing = 0.1;
  double clip_norm = 0.0;  // 0: no clipping
  int max_steps = 100000;
  int max_epochs = 0;     // 0: no limit
  int max_len = 256;      // drop training pairs longer (in subwords) on either side
  int eval_every = 1000;  // optimizer steps between dev evaluations and checkpoints
  int save_every = 0;     // steps between extra saves of checkpoints/last; 0: at evaluations only
  int eval_beam = 1;      // 1: greedy decoding for dev BLEU
  int eval_max_sentences = 0;  // 0: the whole dev set
  BestMetric best_metric = BestMetric::kBleu;
  int patience = 10;  // stop after this many evaluations without improvement; 0: never
  int keep_last = 2;  // step-N checkpoints kept besides last and best
  int log_every = 100;
  // auto | fp32 | bf16: mixed precision (bf16 matrix products, fp32 master weights, optimizer,
  // loss, norms, softmax and gates). See include/headcount/common/precision.h for what auto picks.
  std::string precision = "auto";
};

struct DecodeConfig {
  int beam = 4;
  double length_penalty = 0.6;  // GNMT alpha
  double max_len_offset = 10;   // maximum output length = offset + ratio * source length
  double max_len_ratio = 1.5;
  int batch_size = 64;             // sentences decoded together
  std::string precision = "auto";  // auto | fp32 | bf16, as train.precision
};

struct PruneConfig {
  std::string init_from;  // the converged checkpoint to fine-tune (required by `prune`)
  // Which attention types get gates: any of enc_self, dec_self, enc_dec.
  std::vector<std::string> attention = {"enc_self", "dec_self", "enc_dec"};
  // Parts trained besides the gates: any of encoder, decoder, embeddings; [] trains the gates
  // alone. Voita et al. keep the decoder frozen while pruning the encoder alone.
  std::vector<std::string> train_parts = {"encoder", "decoder", "embeddings"};
  // L_C coefficient: constant, linear (warm-up from 0) or piecewise.
  double lambda = 0.05;
  LambdaScheduleKind lambda_schedule = LambdaScheduleKind::kConstant;
  int lambda_warmup_steps = 0;
  std::vector<double> lambda_steps;   // piecewise: steps at which the value changes...
  std::vector<double> lambda_values;  // ...and the values from there on
  // "sum": L_C = sum over gated heads of P_open (the paper); "layer_mean": the mean over gated
  // layers of their sums (Voita et al.'s code). It changes what a given lambda means.
  PenaltyNorm penalty_norm = PenaltyNorm::kLayerMean;
  // Target mode (Wang et al. 2020; CoFi): a total number of heads to keep (0: off), reached through
  // Lagrange multipliers with a target ramped over target_warmup_steps; the final mask keeps
  // exactly that many heads.
  int target_heads = 0;
  int target_warmup_steps = 1000;
  double lagrangian_lr = 0.01;
  // With one total over several gated types: "top" keeps the target_heads largest log_alpha over
  // all of them; "expected" first gives each type its share of the gates' expected open heads
  // (target_heads x E_t / sum E, E_t = sum of P_open over the type's heads, rounded by largest
  // remainder), then keeps the largest log_alpha within each type. The expected shares are what
  // the Lagrangian constrained; the top rule rounds a type whose heads are all undecided (many
  // small P_open) down to almost nothing (experiments/l0-recovery, item 32).
  TargetSplit target_split = TargetSplit::kTop;
  // With target_split expected: a head whose P_open is below this floor counts as closed when the
  // total is split between the types (E_t sums only the P_open at or above it), so that many
  // nearly closed heads of a type do not add up to a head it then keeps (their diffuse mass is
  // noise, and the largest-remainder rounding gives the extra head to one of them, a near-tie:
  // experiments/l0-recovery, item 49). 0 counts every head (the split as before).
  double split_floor = 0;
  // Recovery: the last recovery_steps of train.max_steps train the model with its final mask
  // fixed (the gates frozen at the values the export takes: exactly target_heads heads in target
  // mode), so that the pruned model's weights adapt to it before the export (0: off).
  int recovery_steps = 0;
  // With recovery_steps in target mode: fix the mask as soon as the expected number of open heads
  // reaches the target after the ramp (at the latest at train.max_steps - recovery_steps), so
  // that the multipliers cannot carry the gates past it and every step after trains the mask.
  bool fix_at_target = false;
  // With fix_at_target: the run trains exactly recovery_steps steps after the mask is fixed and
  // ends there, however early the gates reached the target (train.max_steps - recovery_steps stays
  // the latest fixing point, train.max_steps the latest end), so that the pruned model gets the
  // same number of steps as fine-tuning after importance pruning.
  bool exact_recovery = false;
  // With recovery_steps: when the mask is fixed, the model's weights go back to prune.init_from's
  // (the unpruned model), the optimizer's moments start afresh and train.lr's schedule (its
  // warm-up) starts again, so that the recovery steps fine-tune the unpruned weights under the
  // gates' mask, as importance pruning + fine-tuning does; the gated steps then only choose heads.
  bool rewind = false;
  // With recovery_steps: until the mask is fixed only the gates train (the model's weights stay
  // prune.init_from's, so the gates choose the heads the unpruned model needs least, not the
  // heads its co-adapting weights can do without); from the fixing step on, prune.train_parts
  // train under the mask as before (experiments/l0-recovery, item 39).
  bool freeze_until_fixed = false;
  // With fix_at_target (and rewind, exact_recovery): the heads are chosen by several gate runs
  // instead of one. Each seed here runs the gated steps alone (RUN/gate-seeds/seed-S, this config
  // with `seed` S and stop_at_fix) until its mask is fixed; the mean of their P_open per head
  // then chooses the mask by the run's own rule (target_split), and the run fine-tunes
  // prune.init_from under that mask for exactly recovery_steps steps with its own `seed`. The
  // seeds' gates disagree on heads the data does not decide (experiments/l0-recovery, items
  // 41, 46 and 47); their average is a vote. [] = one gate run, this run's own.
  std::vector<double> gate_seeds;
  // End the run at the step its mask is fixed (fix_at_target, or the latest fixing point): the
  // gated steps only, to choose heads (what each of gate_seeds' runs does).
  bool stop_at_fix = false;
  // Knowledge distillation from the unpruned model (prune.init_from, frozen, eval mode; Hinton
  // et al. 2015, as CoFiPruning): each batch's objective is (1 - w) x cross-entropy + w x T^2 x
  // KL(teacher || student) of the output distributions at temperature T, per target token; in
  // the gated and the recovery steps alike (0: off).
  double distill_weight = 0;
  double distill_temperature = 1;
  // Adam learning rate of the gates' log_alpha (constant). The model's parameters follow
  // train.lr's schedule; the gates need a larger step to move from their open initialisation.
  double gate_lr = 0.01;
  // Hard-Concrete gate settings (see include/headcount/prune/gates.h for their sources).
  double temperature = 0.33;
  double stretch_low = -0.1;
  double stretch_high = 1.1;
  double init_log_alpha = 3.0;
  GateNoise noise = GateNoise::kHead;
  // "l0": the gated fine-tuning above. "fisher": Kwon et al. 2022's post-training pruning (no
  // fine-tuning): diagonal Fisher information of each head's mask on calibration sentences, the
  // best mask under a budget, mask rearrangement within layers, a least-squares refit of each
  // pruned layer's output projection. Its budget is exactly one of target_heads,
  // target_heads_per_type, flops_fraction and latency_fraction.
  PruneMethod method = PruneMethod::kL0;
  std::vector<double> target_heads_per_type;  // [enc_self, dec_self, enc_dec] heads to keep
  double flops_fraction = 0;    // keep at most this fraction of the decoding FLOPs (0: off)
  double latency_fraction = 0;  // ... of the decoding latency measured on this machine (0: off)
  int calibration_sentences = 2000;  // training sentences (teacher-forced) for Fisher and refit
  bool rearrange = true;             // mask rearrangement within each layer
  bool reconstruct = true;           // least-squares refit of each pruned layer's W_o and bias
  // one_pass: every layer's refit from the unpruned model's activations (one calibration pass);
  // sequential: layer by layer in forward order, from the pruned, already refit model's own
  // inputs, toward the unpruned layer's output; sequential_stream: the same toward the unpruned
  // model's residual stream after the sublayer (also undoing the drift of earlier layers).
  // sequential_stream is the default: the best of the three on the Bible baseline (README).
  ReconstructMode reconstruct_mode = ReconstructMode::kSequentialStream;
  // Sequential modes: also refit the layers that kept every head, toward the same target (as
  // Kwon et al.'s mask tuning tunes every layer): corrects the drift the pruned layers before
  // them caused.
  bool reconstruct_every_layer = false;
  double ridge = 1e-4;  // refit ridge, relative to the mean diagonal of the layer's Gram matrix
};

struct Config {
  int seed = 1;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  ThreadsConfig threads;
  DataConfig data;
  VocabConfig vocab;
  ModelConfig model;
  TrainConfig train;
  DecodeConfig decode;
  PruneConfig prune;
};

// One documented key of the schema.
struct ConfigKeyInfo {
  std::string key;
  std::string type;
  std::string help;
  std::string default_value;
};
std::vector<ConfigKeyInfo> config_keys();

// A command-line flag that stands for a config key (translate's --beam for decode.beam). It is
// applied as `--set key=value` is, through the same schema entry, and its errors name the flag.
struct FlagOverride {
  std::string flag;   // "--beam"
  std::string key;    // "decode.beam"
  std::string value;  // the text given on the command line
};

// Why `value` (YAML text, as --set takes it) does not fit config key `key` (its type, range,
// finite numbers), or "" when it fits. Command-line flags check their values with this (a CLI11
// validator), so a flag accepts exactly what its config key accepts.
std::string config_value_problem(const std::string& key, const std::string& value);

// Builds a Config from defaults, files and overrides, remembering where each key was set.
class ConfigLoader {
 public:
  ConfigLoader();
  void apply_file(const fs::path& path);
  // "a.b=value"; the value is parsed as YAML (so lists work: data.test_extra_refs=[a, b]).
  void apply_set(const std::string& assignment);
  void apply_flag(const FlagOverride& flag);
  void apply_yaml_text(const std::string& yaml_text, const std::string& origin);
  // Validates relations between keys and returns the result.
  Config finish() const;
  // Where a key got its value ("configs/base.yaml:12", "--set", "default").
  std::string origin(const std::string& key) const;

 private:
  Config config_;
  std::map<std::string, std::string> origins_;
};

// Keys whose values differ between two configs (schema order).
std::vector<std::string> changed_keys(const Config& a, const Config& b);
// The value of one key as YAML text ("256", "[a, b]").
std::string config_value(const Config& config, const std::string& key);

// YAML text of the whole resolved config (every key, in schema order).
std::string dump_config(const Config& config);
// Writes dump_config() to `path` atomically.
void save_config(const Config& config, const fs::path& path);
// Loads a config written by save_config (a run folder's config.yaml).
Config load_config_file(const fs::path& path);
// `config` (read from `origin`, for messages) with "KEY=VALUE" overrides applied and validated,
// as --set does, then flags that stand for keys (they win over --set): a checkpoint's config under
// eval's or an analysis's overrides.
Config with_overrides(const Config& config, const std::string& origin,
                      const std::vector<std::string>& sets,
                      const std::vector<FlagOverride>& flags = {});

// Whether "KEY=VALUE" overrides (--set) give `key`.
bool overrides_key(const std::vector<std::string>& sets, const std::string& key);

// Paths of the data files, resolved against data.dir.
fs::path data_path(const DataConfig& data, const std::string& name);

}  // namespace headcount
