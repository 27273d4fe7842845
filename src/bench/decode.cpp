#include "headcount/bench/decode.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>

#include "headcount/bench/timing.h"
#include "headcount/common/check.h"
#include "headcount/common/runtime.h"
#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/translate.h"
#include "headcount/model/architecture.h"
#include "headcount/model/shape.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"

namespace headcount::bench {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Another checkpoint of the same model (e.g. its pruned export) or a run's model config: the same
// shape before pruning.
void check_same_shape(const ModelConfig& a, const ModelConfig& b, const std::string& what,
                      const std::string& checkpoint) {
  HC_CHECK(model::same_shape(a, b),
           "{} is not of the model of {} ({} against {}): the comparison would be between two "
           "different models",
           what, checkpoint, model::shape_summary(a), model::shape_summary(b));
}

// The full model with the heads the prune run `mask_from` removed multiplied by 0 (no physical
// pruning).
DecodeVariant masked_variant(const DecodeBench& b) {
  const auto& o = b.options;
  DecodeVariant v{"masked", b.info, run::load_model(b.info, b.device), {}};
  const fs::path csv = run::RunFolder{o.mask_from}.head_removal();
  std::error_code ec;
  if (fs::exists(run::RunFolder{o.mask_from}.config(), ec))
    check_same_shape(load_config_file(run::RunFolder{o.mask_from}.config()).model,
                     b.info.config.model, "--mask-from " + o.mask_from, o.checkpoint);
  int removed = 0;
  for (const auto& row : run::read_head_removal(csv)) {
    if (!row.removal_step) continue;
    const auto& h = row.head;
    auto layers = v.model->attention_layers(h.type);
    HC_CHECK(h.layer >= 0 && h.layer < static_cast<int64_t>(layers.size()) && h.head >= 0 &&
                 h.head < layers[h.layer]->num_heads(),
             "{}: {} is not in {}", csv.string(), h.label(), o.checkpoint);
    auto& m = v.masks[{static_cast<int>(h.type), h.layer}];
    if (!m.defined()) m = torch::ones({layers[h.layer]->num_heads()}, b.device);
    m[h.head] = 0.0;
    ++removed;
  }
  for (auto& [key, m] : v.masks)
    v.model->attention_layers(static_cast<model::AttentionType>(key.first))[key.second]
        ->set_head_scale(m);
  v.name = fmt::format("masked ({} heads)", removed);
  return v;
}

void load_variants(DecodeBench& b) {
  const auto& o = b.options;
  b.variants.push_back({"full", b.info, run::load_model(b.info, b.device), {}});
  if (!o.compare.empty()) {
    const auto pi = run::read_checkpoint_info(o.compare);
    run::require_ungated(o.compare, "benchmarking it");
    HC_CHECK(
        pi.src_vocab_size == b.info.src_vocab_size && pi.tgt_vocab_size == b.info.tgt_vocab_size,
        "--compare {}: another vocabulary than {}", o.compare, o.checkpoint);
    check_same_shape(pi.config.model, b.info.config.model, "--compare " + o.compare, o.checkpoint);
    for (const auto& [name, hash] : pi.vocab_fnv1a) {
      const auto it = b.info.vocab_fnv1a.find(name);
      // An imported model's piece list also records where it came from: the pieces must agree.
      if (name.size() >= 11 && name.compare(name.size() - 11, 11, "pieces.json") == 0 &&
          it != b.info.vocab_fnv1a.end()) {
        const bool tgt = name == data::piece_list_name("tgt");
        HC_CHECK(data::read_piece_list(tgt ? pi.vocab.tgt_pieces : pi.vocab.pieces) ==
                     data::read_piece_list(tgt ? b.info.vocab.tgt_pieces : b.info.vocab.pieces),
                 "--compare {}: another vocabulary ({}) than {}", o.compare, name, o.checkpoint);
        continue;
      }
      HC_CHECK(it == b.info.vocab_fnv1a.end() || it->second == hash,
               "--compare {}: another vocabulary ({}) than {}", o.compare, name, o.checkpoint);
    }
    b.variants.push_back({"pruned", pi, run::load_model(pi, b.device), {}});
  }
  if (!o.mask_from.empty()) b.variants.push_back(masked_variant(b));
  for (auto& v : b.variants) v.model->eval();
}

// The dev sentences measured (--sentences of them; 0: all) and their first references.
void load_sentences(DecodeBench& b) {
  const auto src_vocab = data::Vocab::load(b.info.vocab.src_model);
  const auto corpus = data::load_checkpoint_corpus(b.info.config.data,
                                                   overrides_key(b.options.sets, "data.prepare"));
  for (const auto& s : corpus.dev.src) {
    if (b.options.sentences > 0 && static_cast<int>(b.ids.size()) >= b.options.sentences) break;
    b.ids.push_back(src_vocab.encode(s));
    b.src_len.push_back(static_cast<int64_t>(b.ids.back().size()) + 1);
  }
  b.refs.assign(corpus.dev.tgt.begin(), corpus.dev.tgt.begin() + b.ids.size());
}

void choose_precisions(DecodeBench& b) {
  const Config& c = b.info.config;
  std::vector<std::string> precisions = b.options.precisions;
  if (precisions.empty()) precisions.push_back(c.decode.precision);
  for (const auto& p : precisions) {
    b.choices.push_back(resolve_precision(p, b.device, "decode.precision"));
    b.intra_op_threads.push_back(runtime::intra_op_threads(c.threads, b.choices.back().bf16()));
  }
  for (size_t k = 0; k < b.variants.size(); ++k) {
    for (size_t p = 0; p < b.choices.size(); ++p) {
      b.rows.push_back({k, p,
                        b.choices.size() > 1 ? b.variants[k].name + " " + b.choices[p].name()
                                             : b.variants[k].name});
    }
  }
}

}  // namespace

DecodeBench prepare_decode_bench(const DecodeBenchOptions& o) {
  DecodeBench b;
  b.options = o;
  b.info = run::read_checkpoint_info(o.checkpoint);
  run::require_ungated(o.checkpoint, "benchmarking it");
  b.info.config = with_overrides(b.info.config, o.checkpoint + "/config.yaml", o.sets);
  runtime::apply_threads(b.info.config.threads);
  // The checkpoint's `device` (or --set device=...); one that cannot be used is an error.
  b.device = concrete(runtime::resolve_device(b.info.config.device));
  load_variants(b);
  load_sentences(b);
  choose_precisions(b);
  b.tgt_vocab = std::make_unique<data::Vocab>(data::Vocab::load(b.info.vocab.tgt_model));
  return b;
}

namespace {

struct BeamTimes {
  std::vector<std::vector<double>> secs;
  std::vector<std::vector<int64_t>> out_len;
  std::vector<double> bleu;
};

// Each row `repeats` times, alternating; the first repeat's output gives the lengths and BLEU.
BeamTimes time_rows(DecodeBench& b, int beam) {
  const Config& c = b.info.config;
  auto o = decode::SearchOptions::from(c.decode);
  o.beam = beam;
  BeamTimes t;
  t.secs.resize(b.rows.size());
  t.out_len.resize(b.rows.size());
  t.bleu.resize(b.rows.size());
  for (int r = 0; r < b.options.repeats; ++r) {
    for (size_t k = 0; k < b.rows.size(); ++k) {
      const auto& ch = b.choices[b.rows[k].precision];
      o.precision = ch.name();
      at::set_num_threads(runtime::intra_op_threads(c.threads, ch.bf16()));
      std::vector<std::vector<std::string>> refs;
      if (r == 0) refs = {b.refs};
      const auto tr = decode::translate_and_score(b.variants[b.rows[k].variant].model, *b.tgt_vocab,
                                                  b.ids, o, c.decode.batch_size, b.device, refs);
      t.secs[k].push_back(tr.seconds);
      if (r != 0) continue;
      for (const auto& x : tr.ids) t.out_len[k].push_back(static_cast<int64_t>(x.size()) + 1);
      t.bleu[k] = *tr.scores.at(0).bleu;
    }
  }
  return t;
}

}  // namespace

std::vector<DecodeRowResult> measure_beam(DecodeBench& b, int beam) {
  torch::NoGradGuard no_grad;
  const Config& c = b.info.config;
  const BeamTimes t = time_rows(b, beam);
  const double base = median_of(t.secs[0]);
  // Each model's FLOPs on its own output lengths (a pruned model may stop earlier or later);
  // a masked model computes everything the full one does.
  const double base_flops =
      model::decode_flops(b.variants[0].info.architecture, c.model, b.info.tgt_vocab_size,
                          b.src_len, t.out_len[0], beam);
  const double n = static_cast<double>(b.ids.size());
  std::vector<DecodeRowResult> out;
  for (size_t k = 0; k < b.rows.size(); ++k) {
    const auto& v = b.variants[b.rows[k].variant];
    const double med = median_of(t.secs[k]);
    const auto [lo, hi] = std::minmax_element(t.secs[k].begin(), t.secs[k].end());
    DecodeRowResult r;
    r.name = b.rows[k].name;
    r.heads = v.info.architecture.summary();
    r.sentences_per_s = n / med;
    r.slowest = n / *hi;
    r.fastest = n / *lo;
    r.measured = base / med;
    r.predicted =
        base_flops / model::decode_flops(v.info.architecture, c.model, b.info.tgt_vocab_size,
                                         b.src_len, t.out_len[k], beam);
    r.bleu = t.bleu[k];
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace headcount::bench
