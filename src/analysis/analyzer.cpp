#include "headcount/analysis/analyzer.h"

#include "headcount/analysis/relevance.h"

#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

#include "headcount/common/check.h"
#include "headcount/common/config.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/precision.h"
#include "headcount/common/runtime.h"
#include "headcount/common/text.h"
#include "headcount/data/batching.h"
#include "headcount/data/corpus.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/decode/translate.h"
#include "headcount/eval/bleu.h"
#include "headcount/model/loss.h"
#include "headcount/model/shape.h"
#include "headcount/run/checkpoint.h"
#include "headcount/run/checkpoint_files.h"
#include "headcount/run/run_folder.h"

namespace headcount::analysis {

using model::AttentionType;

struct Analyzer::State {
  AnalyzeOptions options;
  run::CheckpointInfo info;
  torch::Device device{torch::kCPU};
  model::Transformer model{nullptr};
  std::unique_ptr<data::Vocab> src_vocab, tgt_vocab;
  std::vector<data::Example> examples;
  std::vector<std::string> references, sources;
  std::vector<HeadId> heads;
  std::vector<std::vector<int64_t>> batches;  // example indices per teacher-forced batch
  std::vector<int64_t> src_rank, tgt_rank;    // frequency rank of each subword id

  void clear_scales() {
    for (auto t : model::kAttentionTypes)
      for (auto& l : model->attention_layers(t)) l->set_head_scale({});
  }
  void set_record(bool on) {
    for (auto t : model::kAttentionTypes)
      for (auto& l : model->attention_layers(t)) l->set_record(on);
  }
};

namespace {

std::vector<int64_t> frequency_rank(const std::vector<std::string>& lines, const data::Vocab& v) {
  std::vector<int64_t> count(v.size(), 0);
  for (const auto& l : lines)
    for (int id : v.encode(l)) ++count[id];
  std::vector<int64_t> order(v.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return count[a] > count[b]; });
  std::vector<int64_t> rank(v.size());
  for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int64_t>(r);
  return rank;
}

}  // namespace

Analyzer::Analyzer(const AnalyzeOptions& o) : s_(std::make_unique<State>()) {
  s_->options = o;
  HC_CHECK(o.split == "dev" || o.split == "test", "split: expected dev or test, got '{}'", o.split);
  s_->info = run::read_checkpoint_info(o.checkpoint);
  run::require_ungated(o.checkpoint, "analysing it");
  s_->info.config = with_overrides(s_->info.config,
                                   run::CheckpointFolder{o.checkpoint}.config().string(), o.sets);
  const Config& c = s_->info.config;
  s_->device = runtime::resolve_device(c.device);
  runtime::apply_threads(
      c.threads, resolve_precision(c.decode.precision, s_->device, "decode.precision").bf16());
  s_->model = run::load_model(s_->info, s_->device);
  s_->model->eval();
  s_->src_vocab = std::make_unique<data::Vocab>(data::Vocab::load(s_->info.vocab.src_model));
  s_->tgt_vocab = std::make_unique<data::Vocab>(data::Vocab::load(s_->info.vocab.tgt_model));
  const auto corpus = data::load_checkpoint_corpus(c.data, overrides_key(o.sets, "data.prepare"));
  data::ParallelText text = o.split == "dev" ? corpus.dev : corpus.test;
  if (o.sentences > 0 && static_cast<size_t>(o.sentences) < text.src.size()) {
    text.src.resize(o.sentences);
    text.tgt.resize(o.sentences);
  }
  s_->references = text.tgt;
  s_->sources = text.src;
  s_->examples =
      data::encode_pairs(text, *s_->src_vocab, *s_->tgt_vocab, std::numeric_limits<int>::max());
  for (size_t i = 0; i < s_->examples.size(); i += o.batch_sentences) {
    std::vector<int64_t> b;
    for (size_t j = i; j < std::min(s_->examples.size(), i + o.batch_sentences); ++j)
      b.push_back(static_cast<int64_t>(j));
    s_->batches.push_back(b);
  }
  s_->src_rank = frequency_rank(corpus.train.src, *s_->src_vocab);
  s_->tgt_rank = frequency_rank(corpus.train.tgt, *s_->tgt_vocab);
  const auto& arch = s_->model->architecture();
  for (auto t : model::kAttentionTypes) {
    const auto& per_layer = arch.heads(t);
    for (size_t l = 0; l < per_layer.size(); ++l)
      for (int64_t h = 0; h < per_layer[l]; ++h)
        s_->heads.push_back({t, static_cast<int64_t>(l), h});
  }
}

Analyzer::~Analyzer() = default;

const std::vector<HeadId>& Analyzer::heads() const {
  return s_->heads;
}
const model::Architecture& Analyzer::architecture() const {
  return s_->model->architecture();
}

ImportanceUnit importance_unit_from(const std::string& name) {
  for (auto u : {ImportanceUnit::kToken, ImportanceUnit::kSentence, ImportanceUnit::kSplit})
    if (name == importance_unit_name(u)) return u;
  HC_FAIL("importance unit '{}': expected token, sentence or split", name);
}

const char* importance_unit_name(ImportanceUnit unit) {
  switch (unit) {
    case ImportanceUnit::kToken:
      return "token";
    case ImportanceUnit::kSentence:
      return "sentence";
    case ImportanceUnit::kSplit:
      return "split";
  }
  return "?";
}

std::vector<double> Analyzer::importance(bool normalize_layers, ImportanceUnit unit) {
  auto& st = *s_;
  std::map<std::pair<int, int64_t>, torch::Tensor> sums;  // (type, layer) -> [H]
  double src_tokens = 0, tgt_tokens = 0, sentences = 0;
  for (const auto& idx : st.batches) {
    const auto b = data::collate(st.examples, idx, st.device);
    const auto src_mask = b.src.ne(data::kPadId).to(torch::kFloat);     // [B, S]
    const auto tgt_mask = b.tgt_in.ne(data::kPadId).to(torch::kFloat);  // [B, T]
    std::map<std::pair<int, int64_t>, torch::Tensor> scales;
    for (auto t : model::kAttentionTypes) {
      auto layers = st.model->attention_layers(t);
      const auto& mask = t == AttentionType::kEncSelf ? src_mask : tgt_mask;
      for (size_t l = 0; l < layers.size(); ++l) {
        const int64_t H = layers[l]->num_heads();
        if (H == 0) continue;
        auto xi = torch::ones({mask.size(0), mask.size(1), H},
                              torch::TensorOptions().device(st.device).requires_grad(true));
        layers[l]->set_head_scale(xi);
        scales[{static_cast<int>(t), static_cast<int64_t>(l)}] = xi;
      }
    }
    const auto logits = st.model->forward(b.src, b.tgt_in);
    const auto ls = model::label_smoothed_loss(logits, b.tgt_out, 0.0);
    // L: the summed negative log-likelihood of the batch's target tokens, so that each token's
    // |A_h^T dL/dA_h| is its own sentence's and the expectation over tokens below (divided by
    // their count once) does not depend on how the sentences were batched.
    ls.nll.backward();
    for (auto& [key, xi] : scales) {
      const auto& mask =
          key.first == static_cast<int>(AttentionType::kEncSelf) ? src_mask : tgt_mask;
      const auto g = xi.grad() * mask.unsqueeze(-1);  // [B, N, H]: pads contribute nothing
      torch::Tensor contrib;
      switch (unit) {
        case ImportanceUnit::kToken:
          contrib = g.abs().sum(std::vector<int64_t>{0, 1});
          break;
        case ImportanceUnit::kSentence:  // a sentence's multiplier is shared by its tokens
          contrib = g.sum(1).abs().sum(0);
          break;
        case ImportanceUnit::kSplit:
          contrib = -g.sum(std::vector<int64_t>{0, 1});
          break;
      }
      contrib = contrib.detach().to(torch::kDouble).cpu();
      auto& s = sums[key];
      s = s.defined() ? s + contrib : contrib;
    }
    src_tokens += src_mask.sum().item<double>();
    tgt_tokens += tgt_mask.sum().item<double>();
    sentences += static_cast<double>(idx.size());
    st.clear_scales();
  }
  std::vector<double> out;
  out.reserve(st.heads.size());
  std::map<std::pair<int, int64_t>, double> norms;
  for (auto& [key, s] : sums) {
    const bool enc = key.first == static_cast<int>(AttentionType::kEncSelf);
    s = s / (unit == ImportanceUnit::kToken ? (enc ? src_tokens : tgt_tokens) : sentences);
    norms[key] = s.norm().item<double>();
  }
  for (const auto& h : st.heads) {
    const std::pair<int, int64_t> key{static_cast<int>(h.type), h.layer};
    double v = sums.at(key)[h.head].item<double>();
    if (normalize_layers && norms[key] > 0) v /= norms[key];
    out.push_back(v);
  }
  return out;
}

double Analyzer::bleu(const std::vector<HeadId>& masked) {
  auto& st = *s_;
  torch::NoGradGuard no_grad;
  std::map<std::pair<int, int64_t>, torch::Tensor> masks;
  for (const auto& h : masked) {
    auto layers = st.model->attention_layers(h.type);
    HC_CHECK(h.layer < static_cast<int64_t>(layers.size()) && h.head < layers[h.layer]->num_heads(),
             "no head {}", h.label());
    auto& m = masks[{static_cast<int>(h.type), h.layer}];
    if (!m.defined()) m = torch::ones({layers[h.layer]->num_heads()}, st.device);
    m[h.head] = 0.0;
  }
  for (auto& [key, m] : masks)
    st.model->attention_layers(static_cast<AttentionType>(key.first))[key.second]->set_head_scale(
        m);
  auto search = decode::SearchOptions::from(st.info.config.decode);
  search.beam = st.options.beam;
  std::vector<std::vector<int>> ids;
  for (const auto& e : st.examples) ids.push_back(e.src);
  const auto tr =
      decode::translate_and_score(st.model, *st.tgt_vocab, ids, search,
                                  st.info.config.decode.batch_size, st.device, {st.references});
  st.clear_scales();
  return *tr.scores.at(0).bleu;
}

std::vector<HeadStats> Analyzer::head_stats() {
  auto& st = *s_;
  torch::NoGradGuard no_grad;
  std::map<std::pair<int, int64_t>, std::vector<HeadStats>> per_layer;
  st.set_record(true);
  for (const auto& idx : st.batches) {
    const auto b = data::collate(st.examples, idx, st.device);
    st.model->forward(b.src, b.tgt_in);
    const auto src_len = b.src.ne(data::kPadId).sum(1).cpu();
    const auto tgt_len = b.tgt_in.ne(data::kPadId).sum(1).cpu();
    const auto src_cpu = b.src.cpu(), tgt_cpu = b.tgt_in.cpu();
    for (auto t : model::kAttentionTypes) {
      auto layers = st.model->attention_layers(t);
      for (size_t l = 0; l < layers.size(); ++l) {
        const int64_t H = layers[l]->num_heads();
        if (H == 0) continue;
        auto& stats = per_layer[{static_cast<int>(t), static_cast<int64_t>(l)}];
        stats.resize(H);
        const auto w = layers[l]->last_weights().cpu();  // [B, H, T, S]
        for (int64_t i = 0; i < w.size(0); ++i) {
          const int64_t ns = src_len[i].item<int64_t>(), nt = tgt_len[i].item<int64_t>();
          SentenceKeys k;
          k.exclude_top = st.options.exclude_top;
          int64_t nq = 0, nk = 0;
          torch::Tensor key_ids;
          if (t == AttentionType::kEncSelf) {
            nq = nk = ns;
            k.eos = ns - 1;  // the source ends with EOS
            key_ids = src_cpu[i].slice(0, 0, ns);
          } else if (t == AttentionType::kDecSelf) {
            nq = nk = nt;
            k.eos = 0;  // the decoder's special key is BOS, at position 0
            k.causal = true;
            key_ids = tgt_cpu[i].slice(0, 0, nt);
          } else {
            nq = nt;
            nk = ns;
            k.self = false;
            k.eos = ns - 1;
            key_ids = src_cpu[i].slice(0, 0, ns);
          }
          const auto& ranks = t == AttentionType::kDecSelf ? st.tgt_rank : st.src_rank;
          k.rank.resize(nk);
          for (int64_t j = 0; j < nk; ++j) k.rank[j] = ranks.at(key_ids[j].item<int64_t>());
          for (int64_t h = 0; h < H; ++h) stats[h].add(w[i][h].slice(0, 0, nq).slice(1, 0, nk), k);
        }
      }
    }
  }
  st.set_record(false);
  std::vector<HeadStats> out;
  for (const auto& h : st.heads)
    out.push_back(per_layer[{static_cast<int>(h.type), h.layer}][h.head]);
  return out;
}

torch::Tensor Analyzer::js_distances(AttentionType type) {
  auto& st = *s_;
  torch::NoGradGuard no_grad;
  std::vector<size_t> members;
  for (size_t i = 0; i < st.heads.size(); ++i)
    if (st.heads[i].type == type) members.push_back(i);
  const int64_t n = static_cast<int64_t>(members.size());
  // device: cpu (sums pairwise_js of weights copied to the host below; read there by the caller)
  auto total = torch::zeros({n, n}, torch::kDouble);
  if (n == 0) return total;
  auto layers = st.model->attention_layers(type);
  for (auto& l : layers) l->set_record(true);
  for (const auto& idx : st.batches) {
    const auto b = data::collate(st.examples, idx, st.device);
    st.model->forward(b.src, b.tgt_in);
    const auto src_len = b.src.ne(data::kPadId).sum(1).cpu();
    const auto tgt_len = b.tgt_in.ne(data::kPadId).sum(1).cpu();
    std::vector<torch::Tensor> w;
    for (auto& l : layers)
      if (l->num_heads() > 0) w.push_back(l->last_weights().cpu());
    const auto all = torch::cat(w, 1);  // [B, n, T, S]
    for (int64_t i = 0; i < all.size(0); ++i) {
      const int64_t nq =
          type == AttentionType::kEncSelf ? src_len[i].item<int64_t>() : tgt_len[i].item<int64_t>();
      const int64_t nk =
          type == AttentionType::kDecSelf ? tgt_len[i].item<int64_t>() : src_len[i].item<int64_t>();
      total += pairwise_js(all[i].slice(1, 0, nq).slice(2, 0, nk));
    }
  }
  for (auto& l : layers) l->set_record(false);
  return total;
}

SyntaxResult Analyzer::syntax(const std::vector<DepSentence>& parses) {
  auto& st = *s_;
  HC_CHECK(parses.size() >= st.examples.size(),
           "the CoNLL-U file has {} sentences, the analysis uses {} of the {} split: give parses "
           "of (at least) its first {} source sentences, in order",
           parses.size(), st.examples.size(), st.options.split, st.examples.size());
  torch::NoGradGuard no_grad;
  SyntaxResult r;
  for (const auto& h : st.heads)
    if (h.type == AttentionType::kEncSelf) r.heads.push_back(h);
  r.stats.resize(r.heads.size());
  // Piece -> word maps (EOS and unmatched pieces: -1); nullopt for sentences that do not match.
  std::vector<std::optional<std::vector<int64_t>>> maps(st.examples.size());
  std::string first_mismatch;
  for (size_t i = 0; i < st.examples.size(); ++i) {
    std::vector<std::string> pieces, words;
    for (int id : st.examples[i].src) pieces.push_back(st.src_vocab->piece(id));
    for (const auto& w : parses[i].words) words.push_back(w.form);
    maps[i] = map_pieces_to_words(pieces, words);
    if (!maps[i]) {
      ++r.unmatched;
      if (first_mismatch.empty())
        first_mismatch =
            fmt::format("sentence {} (CoNLL-U line {}): pieces '{}' against words '{}'", i + 1,
                        parses[i].line, fmt::join(pieces, " "), fmt::join(words, " "));
      continue;
    }
    maps[i]->push_back(-1);  // EOS
    ++r.sentences;
  }
  HC_CHECK(r.unmatched * 2 <= static_cast<int64_t>(st.examples.size()),
           "{} of {} source sentences do not match their CoNLL-U parse (the parses must be of the "
           "{} split's source side, in order); first: {}",
           r.unmatched, st.examples.size(), st.options.split, first_mismatch);
  auto layers = st.model->attention_layers(AttentionType::kEncSelf);
  for (auto& l : layers) l->set_record(true);
  for (const auto& idx : st.batches) {
    const auto b = data::collate(st.examples, idx, st.device);
    st.model->encode(b.src);
    const auto src_len = b.src.ne(data::kPadId).sum(1).cpu();
    std::vector<torch::Tensor> w(layers.size());
    for (size_t l = 0; l < layers.size(); ++l)
      if (layers[l]->num_heads() > 0) w[l] = layers[l]->last_weights().cpu();  // [B, H, S, S]
    for (size_t i = 0; i < idx.size(); ++i) {
      const auto& map = maps[idx[i]];
      if (!map) continue;
      const auto& parse = parses[idx[i]];
      const int64_t ns = src_len[static_cast<int64_t>(i)].item<int64_t>();
      const auto n_words = static_cast<int64_t>(parse.words.size());
      std::vector<bool> has_piece(n_words, false);
      for (auto wi : *map)
        if (wi >= 0) has_piece[wi] = true;
      r.baseline.add(parse, has_piece);
      size_t k = 0;
      for (const auto& h : r.heads) {
        const auto a = w[h.layer][static_cast<int64_t>(i)][h.head].slice(0, 0, ns).slice(1, 0, ns);
        r.stats[k++].add(word_attention(a, *map, n_words), parse, has_piece);
      }
    }
  }
  for (auto& l : layers) l->set_record(false);
  return r;
}

RemovalOrder read_removal_order(const fs::path& run, const std::vector<HeadId>& heads,
                                const std::string& checkpoint) {
  // The removal order is of the heads of the model the run started from. Its prune.init_from is a
  // path of the machine and folder it ran in: where it names a checkpoint here, it must be this
  // one.
  std::error_code ec;
  const fs::path config = run::RunFolder{run}.config();
  if (fs::exists(config, ec)) {
    const Config run_config = load_config_file(config);
    const std::string& init = run_config.prune.init_from;
    HC_CHECK(init.empty() || !fs::is_directory(init, ec) || fs::equivalent(init, checkpoint, ec),
             "{} started from {} (its prune.init_from), not from {}: its removal order is of that "
             "model's heads; give --checkpoint {}",
             run.string(), init, checkpoint, init);
    const ModelConfig b = run::read_checkpoint_info(checkpoint).config.model;
    HC_CHECK(model::same_shape(run_config.model, b),
             "{} pruned a model of another shape than {} ({} against {}): give --checkpoint the "
             "run's prune.init_from",
             run.string(), checkpoint, model::shape_summary(run_config.model),
             model::shape_summary(b));
  }
  std::map<std::tuple<int, int64_t, int64_t>, size_t> index;
  for (size_t i = 0; i < heads.size(); ++i)
    index[{static_cast<int>(heads[i].type), heads[i].layer, heads[i].head}] = i;
  const fs::path file = run::RunFolder{run}.head_removal();
  RemovalOrder r;
  for (const auto& row : run::read_head_removal(file)) {
    const auto it = index.find({static_cast<int>(row.head.type), row.head.layer, row.head.head});
    HC_CHECK(it != index.end(), "{}: {} is not in {} (give the checkpoint the run started from)",
             file.string(), row.head.label(), checkpoint);
    const double step = row.removal_step ? static_cast<double>(*row.removal_step) : -1.0;
    r.gated.push_back(it->second);
    r.step.push_back(step);
    if (step >= 0) r.removed.push_back(heads[it->second]), r.last = std::max(r.last, step);
  }
  for (auto& s : r.step)
    if (s < 0) s = r.last + 1;  // kept: after every removal
  return r;
}

RelevanceResult Analyzer::relevance(double eps) {
  auto& st = *s_;
  torch::NoGradGuard no_grad;
  const auto& arch = st.model->architecture();
  // Sums per (type, layer): shares [H] with the number of tokens they were taken over, raw [H].
  std::map<std::pair<int, int64_t>, torch::Tensor> share, raw;
  std::map<std::pair<int, int64_t>, double> counted;
  double src_sum = 0, input_sum = 0, reached = 0;
  RelevanceResult r;
  const auto started = std::chrono::steady_clock::now();
  for (size_t i = 0; i < st.examples.size(); ++i) {
    const auto b = data::collate(st.examples, {static_cast<int64_t>(i)}, st.device);
    const auto tr = propagate_relevance(*st.model, b.src[0], b.tgt_in[0], eps);
    const auto top = tr.top.to(torch::kDouble).cpu();
    for (auto t : model::kAttentionTypes) {
      const auto& layers = tr.heads[static_cast<int>(t)];
      for (size_t l = 0; l < layers.size(); ++l) {
        if (arch.heads(t)[l] == 0) continue;
        const auto h = layers[l].to(torch::kDouble).cpu();  // [N, H]
        const auto layer_sum = h.sum(1, true);              // [N, 1]
        // Tokens whose heads' relevance cancels out have no meaningful shares.
        const auto valid = layer_sum.abs().squeeze(1) > 1e-9 * top.abs();
        const std::pair<int, int64_t> key{static_cast<int>(t), static_cast<int64_t>(l)};
        const auto s = (h.index({valid}) / layer_sum.index({valid})).sum(0);
        if (!share.count(key)) {
          share[key] = torch::zeros_like(s);
          raw[key] = torch::zeros_like(s);
        }
        share[key] += s;
        raw[key] += h.sum(0);
        counted[key] += valid.sum().item<double>();
      }
    }
    const double src_in = tr.src_input.to(torch::kDouble).sum().item<double>();
    const double all_in = src_in + tr.tgt_input.to(torch::kDouble).sum().item<double>();
    src_sum += src_in;
    input_sum += all_in;
    reached += all_in / std::max(1e-12, top.sum().item<double>());
    r.tokens += tr.top.size(0);
    ++r.sentences;
    if ((i + 1) % 100 == 0 || i + 1 == st.examples.size()) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      log::info("relevance: {}/{} sentences ({:.1f} sentences/s)", i + 1, st.examples.size(),
                (i + 1) / std::max(secs, 1e-9));
    }
  }
  for (const auto& h : st.heads) {
    const std::pair<int, int64_t> key{static_cast<int>(h.type), h.layer};
    const auto it = share.find(key);
    const double n = counted[key];
    r.token_share.push_back(it == share.end() || n == 0 ? std::nan("")
                                                        : it->second[h.head].item<double>() / n);
    const double layer_total = it == share.end() ? 0 : raw[key].sum().item<double>();
    r.share.push_back(layer_total == 0 ? std::nan("")
                                       : raw[key][h.head].item<double>() / layer_total);
    r.raw.push_back(it == share.end() || r.tokens == 0
                        ? std::nan("")
                        : raw[key][h.head].item<double>() / static_cast<double>(r.tokens));
  }
  r.source_share = input_sum != 0 ? src_sum / input_sum : std::nan("");
  r.reached_inputs = r.sentences > 0 ? reached / static_cast<double>(r.sentences) : std::nan("");
  return r;
}

namespace {

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const auto c = t.cpu().contiguous();  // data_ptr reads host memory
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// The examples with the given targets, and each side's piece -> word map.
struct AlignExamples {
  std::vector<data::Example> ex;
  std::vector<std::vector<int64_t>> src_map, tgt_map;  // source: EOS mapped to -1
  std::vector<int64_t> n_src, n_tgt;                   // words
  std::vector<int64_t> usable;                         // examples whose pieces spell their words
};

AlignExamples align_examples(const std::vector<data::Example>& examples,
                             const std::vector<std::string>& sources,
                             const std::vector<std::string>& targets, const data::Vocab& src_vocab,
                             const data::Vocab& tgt_vocab, int64_t* unmatched) {
  const size_t n = examples.size();
  AlignExamples a;
  a.ex.resize(n);
  a.src_map.resize(n);
  a.tgt_map.resize(n);
  a.n_src.resize(n);
  a.n_tgt.resize(n);
  for (size_t i = 0; i < n; ++i) {
    a.ex[i].src = examples[i].src;
    a.ex[i].tgt = tgt_vocab.encode(targets[i]);
    a.ex[i].id = static_cast<int64_t>(i);
    std::vector<std::string> sp, tp;
    for (int id : a.ex[i].src) sp.push_back(src_vocab.piece(id));
    for (int id : a.ex[i].tgt) tp.push_back(tgt_vocab.piece(id));
    // Words as the links number them: the line split at spaces.
    const auto sw = text::split(sources[i], ' '), tw = text::split(targets[i], ' ');
    auto sm = map_pieces_to_words(sp, sw);
    auto tm = map_pieces_to_words(tp, tw);
    if (!sm || !tm || a.ex[i].tgt.empty()) {
      ++*unmatched;
      continue;
    }
    sm->push_back(-1);  // EOS
    a.src_map[i] = std::move(*sm);
    a.tgt_map[i] = std::move(*tm);
    a.n_src[i] = static_cast<int64_t>(sw.size());
    a.n_tgt[i] = static_cast<int64_t>(tw.size());
    a.usable.push_back(static_cast<int64_t>(i));
  }
  return a;
}

// Scores sentence i of a batch: w[l] [B, H, T, S] are the weights of decoder layer l (undefined:
// no heads), `index` maps (layer, head) to a position in r->heads.
void score_sentence(const AlignExamples& a, int64_t i, int64_t bi,
                    const std::vector<torch::Tensor>& w, const std::vector<data::WordLink>& links,
                    const std::map<std::pair<int64_t, int64_t>, size_t>& index,
                    AlignmentResult* r) {
  const GoldAlignment gold(links, a.n_tgt[i]);
  r->baseline.add(gold, a.n_src[i]);
  r->target_words += a.n_tgt[i];
  for (int64_t t = 0; t < a.n_tgt[i]; ++t) r->linked_words += gold.linked(t) ? 1 : 0;
  ++r->sentences;
  const auto S = static_cast<int64_t>(a.src_map[i].size());  // pieces + EOS
  const auto m = static_cast<int64_t>(a.tgt_map[i].size());  // target pieces
  for (size_t l = 0; l < w.size(); ++l) {
    if (!w[l].defined()) continue;
    const auto wl = w[l][bi].slice(2, 0, S);  // [H, T, S]
    for (int conv = 0; conv < 2; ++conv) {
      // predict: row j outputs piece j; input: row j + 1 reads it.
      const auto rows = wl.slice(1, conv, conv + m);
      const auto word =
          cross_word_attention(rows, a.tgt_map[i], a.n_tgt[i], a.src_map[i], a.n_src[i]);
      const auto best = align_argmax(word);  // [H, n_tgt]
      auto& per_head = conv == 0 ? r->predict : r->input;
      for (int64_t h = 0; h < best.size(0); ++h)
        per_head[index.at({static_cast<int64_t>(l), h})] +=
            score_alignment(to_vector(best[h]), gold);
      (conv == 0 ? r->layer_predict : r->layer_input)[l] +=
          score_alignment(to_vector(align_argmax(word.mean(0))), gold);
    }
  }
}

}  // namespace

AlignmentResult Analyzer::alignment(const std::vector<std::string>& targets,
                                    const std::vector<std::vector<data::WordLink>>& links) {
  auto& st = *s_;
  const size_t n = st.examples.size();
  HC_CHECK(targets.size() >= n && links.size() >= n,
           "alignment: {} target sentences and {} link lines for the {} sentences analysed",
           targets.size(), links.size(), n);
  torch::NoGradGuard no_grad;
  AlignmentResult r;
  std::map<std::pair<int64_t, int64_t>, size_t> index;  // (layer, head) -> position in r.heads
  for (const auto& h : st.heads)
    if (h.type == AttentionType::kEncDec) {
      index[{h.layer, h.head}] = r.heads.size();
      r.heads.push_back(h);
    }
  r.predict.resize(r.heads.size());
  r.input.resize(r.heads.size());
  auto layers = st.model->attention_layers(AttentionType::kEncDec);
  r.layer_predict.resize(layers.size());
  r.layer_input.resize(layers.size());
  const auto a =
      align_examples(st.examples, st.sources, targets, *st.src_vocab, *st.tgt_vocab, &r.unmatched);
  const auto& usable = a.usable;
  for (auto& l : layers) l->set_record(true);
  for (size_t start = 0; start < usable.size(); start += st.options.batch_sentences) {
    const std::vector<int64_t> idx(
        usable.begin() + static_cast<int64_t>(start),
        usable.begin() +
            static_cast<int64_t>(std::min(usable.size(), start + st.options.batch_sentences)));
    const auto b = data::collate(a.ex, idx, st.device);
    st.model->forward(b.src, b.tgt_in);
    std::vector<torch::Tensor> w(layers.size());
    for (size_t l = 0; l < layers.size(); ++l)
      if (layers[l]->num_heads() > 0) w[l] = layers[l]->last_weights().cpu();  // [B, H, T, S]
    for (size_t bi = 0; bi < idx.size(); ++bi)
      score_sentence(a, idx[bi], static_cast<int64_t>(bi), w, links[idx[bi]], index, &r);
  }
  for (auto& l : layers) l->set_record(false);
  return r;
}

}  // namespace headcount::analysis
