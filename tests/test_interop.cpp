// MarianMT import and export against an independent reference: tests/data/marian-tiny holds a
// random-weight MarianMT folder and the outputs of a Python implementation of HF's MarianMTModel
// (tests/reference/marian_reference.py; float64 logits, greedy decodes, tokenisation).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <minizip/unzip.h>
#include <minizip/zip.h>

#include <nlohmann/json.hpp>

#include "headcount/analysis/relevance.h"
#include "headcount/data/vocab.h"
#include "headcount/decode/search.h"
#include "headcount/interop/marian.h"
#include "headcount/interop/npz.h"
#include "headcount/model/safetensors.h"
#include "headcount/model/transformer.h"
#include "headcount/prune/export.h"
#include "headcount/prune/fisher.h"
#include "headcount/prune/prune_trainer.h"
#include "headcount/run/checkpoint.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using json = nlohmann::json;
using testing::TempDir;

const json& reference() {
  static const json r =
      json::parse(io::read_file(testing::test_data("marian-tiny") / "reference.json"));
  return r;
}

// A nested JSON array of numbers as a float64 tensor.
torch::Tensor tensor_of(const json& j) {
  std::vector<double> flat;
  std::vector<int64_t> shape;
  const json* at = &j;
  while (at->is_array()) {
    shape.push_back(static_cast<int64_t>(at->size()));
    if (at->empty()) break;
    at = &(*at)[0];
  }
  std::function<void(const json&)> walk = [&](const json& x) {
    if (x.is_array()) {
      for (const auto& e : x) walk(e);
    } else {
      flat.push_back(x.get<double>());
    }
  };
  walk(j);
  return torch::tensor(flat, torch::kFloat64).view(shape);
}

const interop::MarianIds& ids() {
  static const interop::MarianIds m = interop::MarianIds::make(122, 121, 0, 1);
  return m;
}

std::vector<int64_t> to_headcount(const json& marian_ids) {
  std::vector<int64_t> out;
  for (const auto& i : marian_ids) out.push_back(ids().to_headcount.at(i.get<int64_t>()));
  return out;
}

torch::Tensor row(const std::vector<int64_t>& v) {
  return torch::tensor(v, torch::kInt64).unsqueeze(0);
}

// Headcount logits [.., V + 1] in Marian's order [.., V].
torch::Tensor marian_order(const torch::Tensor& logits) {
  return logits.index_select(-1, torch::tensor(ids().to_headcount)).to(torch::kFloat64);
}

// A fixture folder (tests/data/NAME) imported once per test binary.
const fs::path& imported_fixture(const std::string& name) {
  static TempDir dir;
  static std::map<std::string, fs::path> done;
  auto it = done.find(name);
  if (it == done.end()) {
    const fs::path p = dir.path() / name;
    interop::import_marian(testing::test_data(name), p);
    it = done.emplace(name, p).first;
  }
  return it->second;
}

const fs::path& imported() {
  return imported_fixture("marian-tiny");
}

model::Transformer load(const fs::path& checkpoint) {
  auto m = run::load_model(run::read_checkpoint_info(checkpoint), torch::kCPU);
  m->eval();
  return m;
}

TEST(MarianIds, PermutationByHand) {
  // Marian: eos 0, unk 1, pieces 2-4, pad 5 -> headcount: pad 0 (new), unk 1, bos 2 = Marian's
  // pad, eos 3, the pieces from 4 on in Marian's order.
  const auto m = interop::MarianIds::make(6, 5, 0, 1);
  EXPECT_EQ(m.to_headcount, (std::vector<int64_t>{3, 1, 4, 5, 6, 2}));
  EXPECT_EQ(m.to_marian, (std::vector<int64_t>{-1, 1, 5, 0, 2, 3, 4}));
  EXPECT_THROW(interop::MarianIds::make(6, 5, 5, 1), Error);
}

TEST(MarianImport, TokenisationMatchesMarianTokenizer) {
  const auto info = run::read_checkpoint_info(imported());
  const auto src = data::Vocab::load(info.vocab.src_model);
  const auto tgt = data::Vocab::load(info.vocab.tgt_model);
  EXPECT_EQ(src.size(), 123);
  for (const auto& c : reference()["cases"]) {
    // Source: the pieces' ids, then </s> (added by the batching as by MarianTokenizer).
    auto got = src.encode(c["source"].get<std::string>());
    std::vector<int64_t> with_eos(got.begin(), got.end());
    with_eos.push_back(data::kEosId);
    EXPECT_EQ(with_eos, to_headcount(c["input_ids"])) << c["source"];
    auto labels = tgt.encode(c["target"].get<std::string>());
    std::vector<int64_t> l(labels.begin(), labels.end());
    l.push_back(data::kEosId);
    EXPECT_EQ(l, to_headcount(c["labels"])) << c["target"];
  }
  for (const auto& d : reference()["detokenize"]) {
    const auto h = to_headcount(d["ids"]);
    EXPECT_EQ(tgt.decode(std::vector<int>(h.begin(), h.end())), d["text"].get<std::string>());
  }
}

TEST(MarianImport, LogitsAndEncoderOutputMatchTheReference) {
  auto m = load(imported());
  torch::NoGradGuard ng;
  double worst = 0;
  for (const auto& c : reference()["cases"]) {
    const auto src = row(to_headcount(c["input_ids"]));
    const auto enc = m->encode(src);
    const auto want_enc = tensor_of(c["encoder_last_hidden_state"]);
    EXPECT_LT((enc.memory[0].to(torch::kFloat64) - want_enc).abs().max().item<double>(), 1e-4);
    const auto logits = m->forward(src, row(to_headcount(c["decoder_input_ids"])));
    const auto diff = (marian_order(logits[0]) - tensor_of(c["logits"])).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << c["source"];
    worst = std::max(worst, diff);
    // headcount's extra pad row takes no probability.
    EXPECT_EQ(torch::softmax(logits[0], -1).select(-1, data::kPadId).max().item<float>(), 0.0f);
  }
  std::printf("max |logit - reference| over the cases: %.3g\n", worst);
  // The padded batch: headcount pads with its own pad (masked in the encoder, after the real
  // positions in the decoder); the real positions equal the reference's.
  const auto& b = reference()["batch"];
  std::vector<torch::Tensor> srcs, tgts;
  for (size_t i = 0; i < b["input_ids"].size(); ++i) {
    auto s = to_headcount(b["input_ids"][i]);
    for (size_t k = 0; k < s.size(); ++k)
      if (b["attention_mask"][i][k] == 0) s[k] = data::kPadId;
    srcs.push_back(row(s));
    auto t = to_headcount(b["decoder_input_ids"][i]);
    for (size_t k = b["decoder_lengths"][i].get<size_t>(); k < t.size(); ++k) t[k] = data::kPadId;
    tgts.push_back(row(t));
  }
  const auto logits = marian_order(m->forward(torch::cat(srcs), torch::cat(tgts)));
  const auto want = tensor_of(b["logits"]);
  for (int64_t i = 0; i < 2; ++i) {
    const int64_t n = b["decoder_lengths"][i].get<int64_t>();
    EXPECT_LT((logits[i].narrow(0, 0, n) - want[i].narrow(0, 0, n)).abs().max().item<double>(),
              1e-4);
  }
}

TEST(MarianImport, GreedyDecodesAreTheReferences) {
  auto m = load(imported());
  torch::NoGradGuard ng;
  const int64_t steps = reference()["greedy_max_new_tokens"].get<int64_t>();
  for (const auto& c : reference()["cases"]) {
    decode::TransformerStepper stepper(m, row(to_headcount(c["input_ids"])), 1);
    const auto hyp = decode::greedy_search(stepper, {steps});
    // The reference's output starts with the decoder start (pad) and keeps </s>; headcount's
    // hypothesis has neither.
    auto want = to_headcount(c["greedy"]["output_ids"]);
    want.erase(want.begin());
    if (c["greedy"]["stopped_at_eos"].get<bool>()) want.pop_back();
    EXPECT_EQ(hyp[0].tokens, want) << c["source"];
  }
}

TEST(MarianImport, PytorchModelBinGivesTheSameWeights) {
  TempDir dir;
  const fs::path src = testing::test_data("marian-tiny");
  fs::create_directories(dir.path() / "bin");
  for (const char* f :
       {"config.json", "pytorch_model.bin", "source.spm", "target.spm", "vocab.json"})
    fs::copy_file(src / f, dir.path() / "bin" / f);
  const auto r = interop::import_marian(dir.path() / "bin", dir.path() / "ckpt");
  EXPECT_NE(r.weights_file.find("pytorch_model.bin"), std::string::npos);
  auto a = load(imported());
  auto b = load(dir.path() / "ckpt");
  const auto pa = a->named_parameters();
  for (const auto& p : b->named_parameters()) EXPECT_TRUE(torch::equal(p.value(), pa[p.key()]));
}

// The Marian tensors of a folder's model.safetensors, by name.
std::map<std::string, torch::Tensor> tensors(const fs::path& folder) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : model::read_safetensors(folder / "model.safetensors").tensors)
    out[name] = t;
  return out;
}

// The folder's model.safetensors holds exactly `want`'s tensors, bit for bit.
void expect_same_tensors(const std::map<std::string, torch::Tensor>& want, const fs::path& folder) {
  const auto got = tensors(folder);
  ASSERT_EQ(got.size(), want.size()) << folder.string();
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(torch::equal(got.at(name), t)) << name;
  }
}

TEST(MarianExport, ImportThenExportGivesBackTheSameFolder) {
  TempDir dir;
  const auto r =
      interop::export_marian(imported(), dir.path() / "hf", interop::ExportMode::kCompatible);
  EXPECT_EQ(r.architecture.summary(), "8/8/8");
  const auto orig = tensors(testing::test_data("marian-tiny"));
  expect_same_tensors(orig, dir.path() / "hf");
  const fs::path ref = testing::test_data("marian-tiny");
  EXPECT_EQ(json::parse(io::read_file(dir.path() / "hf" / "vocab.json")),
            json::parse(io::read_file(ref / "vocab.json")));
  EXPECT_EQ(io::read_file(dir.path() / "hf" / "source.spm"), io::read_file(ref / "source.spm"));
  auto config = json::parse(io::read_file(dir.path() / "hf" / "config.json"));
  EXPECT_EQ(config, json::parse(io::read_file(ref / "config.json")));
}

TEST(MarianExport, EmbeddingsTrainedApartExportAsSeparateEmbeddings) {
  // marian-tiny with an output matrix of its own (tie_word_embeddings false): headcount's model
  // then has its own source and target embeddings, both the shared matrix at import.
  TempDir dir;
  const fs::path f = dir.path() / "untied";
  fs::copy(testing::test_data("marian-tiny"), f);
  fs::remove(f / "pytorch_model.bin");
  auto config = json::parse(io::read_file(f / "config.json"));
  config["tie_word_embeddings"] = false;
  io::write_file_atomic(f / "config.json", config.dump());
  auto st = model::read_safetensors(f / "model.safetensors");
  const auto shared = tensors(f).at("model.shared.weight");
  st.tensors.emplace_back("lm_head.weight", shared * 0.5);
  model::write_safetensors(f / "model.safetensors", st);
  interop::import_marian(f, dir.path() / "ckpt");
  // As training leaves it: the target embedding moved away from the source one.
  const auto info = run::read_checkpoint_info(dir.path() / "ckpt");
  auto m = run::load_model(info, torch::kCPU);
  ASSERT_FALSE(m->config().tie_embeddings);
  {
    torch::NoGradGuard ng;
    m->tgt_embed->weight.add_(0.01);
  }
  run::save_checkpoint(dir.path() / "trained", m, nullptr, run::TrainState{}, info.config,
                       info.vocab);
  const auto r = interop::export_marian(dir.path() / "trained", dir.path() / "hf",
                                        interop::ExportMode::kCompatible);
  EXPECT_EQ(r.max_abs_logit_diff, 0.0);  // HF's one shared matrix would have lost the change
  const auto out = json::parse(io::read_file(dir.path() / "hf" / "config.json"));
  EXPECT_EQ(out.at("share_encoder_decoder_embeddings"), false);
  EXPECT_EQ(json::parse(io::read_file(dir.path() / "hf" / "target_vocab.json")),
            json::parse(io::read_file(f / "vocab.json")));
  EXPECT_EQ(
      json::parse(io::read_file(dir.path() / "hf" / "tokenizer_config.json")).at("separate_vocabs"),
      true);
  const auto back = tensors(dir.path() / "hf");
  EXPECT_TRUE(back.count("model.encoder.embed_tokens.weight") &&
              back.count("model.decoder.embed_tokens.weight") && back.count("lm_head.weight"));
  EXPECT_TRUE(torch::equal(back.at("model.encoder.embed_tokens.weight"), shared));
  EXPECT_TRUE(torch::allclose(back.at("model.decoder.embed_tokens.weight"), shared + 0.01));
  // Not trained apart: the shared layout, as imported.
  const auto same = interop::export_marian(dir.path() / "ckpt", dir.path() / "hf-same",
                                           interop::ExportMode::kCompatible);
  EXPECT_EQ(same.max_abs_logit_diff, 0.0);
  EXPECT_TRUE(tensors(dir.path() / "hf-same").count("model.shared.weight"));
}

TEST(MarianExport, PrunedModelExportsBothWaysWithItsOwnOutputs) {
  TempDir dir;
  // Remove five heads of the imported model, among them every encoder-decoder head of layer 1.
  const std::vector<model::HeadId> removed = {
      {model::AttentionType::kEncSelf, 0, 1}, {model::AttentionType::kEncSelf, 1, 3},
      {model::AttentionType::kDecSelf, 0, 0}, {model::AttentionType::kEncDec, 1, 0},
      {model::AttentionType::kEncDec, 1, 1},  {model::AttentionType::kEncDec, 1, 2},
      {model::AttentionType::kEncDec, 1, 3}};
  prune::export_without_heads(imported(), removed, dir.path() / "pruned");
  auto pruned = load(dir.path() / "pruned");
  EXPECT_EQ(pruned->architecture().summary(), "6/7/4");
  const auto compatible = interop::export_marian(dir.path() / "pruned", dir.path() / "compat",
                                                 interop::ExportMode::kCompatible);
  EXPECT_LT(compatible.max_abs_logit_diff, 1e-5);
  const auto native = interop::export_marian(dir.path() / "pruned", dir.path() / "native",
                                             interop::ExportMode::kNative);
  EXPECT_EQ(native.architecture, pruned->architecture());
  EXPECT_EQ(native.max_abs_logit_diff, 0.0);
  // Compatible: the original shapes (4 heads x 4 dims everywhere); native: the pruned ones.
  EXPECT_EQ(tensors(dir.path() / "compat")
                .at("model.decoder.layers.1.encoder_attn.q_proj.weight")
                .sizes(),
            (torch::IntArrayRef{16, 16}));
  EXPECT_EQ(tensors(dir.path() / "native")
                .at("model.decoder.layers.1.encoder_attn.q_proj.weight")
                .sizes(),
            (torch::IntArrayRef{0, 16}));
  interop::import_marian(dir.path() / "compat", dir.path() / "compat-in");
  interop::import_marian(dir.path() / "native", dir.path() / "native-in");
  auto compat = load(dir.path() / "compat-in");
  auto back = load(dir.path() / "native-in");
  EXPECT_EQ(compat->architecture().summary(), "8/8/8");
  EXPECT_EQ(back->architecture(), pruned->architecture());
  torch::NoGradGuard ng;
  const auto& c = reference()["cases"][1];
  const auto src = row(to_headcount(c["input_ids"]));
  const auto tgt = row(to_headcount(c["decoder_input_ids"]));
  const auto want = pruned->forward(src, tgt);
  const double compat_diff = (compat->forward(src, tgt) - want).abs().max().item<double>();
  std::printf("compatible export: max |logit - pruned model's| = %.3g\n", compat_diff);
  EXPECT_LT(compat_diff, 1e-5);
  EXPECT_TRUE(torch::equal(back->forward(src, tgt), want));
}

// An imported checkpoint through L0 (target mode, distillation, recovery) and Fisher pruning on
// the tiny number corpus (its words are pieces, or <unk>, of the fixture's SentencePiece models),
// and back to MarianMT.
void prune_and_export(const fs::path& imported_checkpoint, const TempDir& dir) {
  const Config data = tiny_run_config(dir, 16);
  Config c = run::read_checkpoint_info(imported_checkpoint).config;
  c.data = data.data;
  c.threads = data.threads;
  c.prune.init_from = imported_checkpoint.string();
  c.train.max_steps = 6;
  c.train.eval_every = 3;
  c.train.warmup_steps = 2;
  c.prune.target_heads = 12;
  c.prune.target_warmup_steps = 2;
  c.prune.lagrangian_lr = 1.0;
  c.prune.recovery_steps = 2;
  c.prune.distill_weight = 0.5;
  train::TrainOptions o;
  o.run_dir = dir / "l0";
  o.init_from = imported_checkpoint;
  prune::PruneTrainer(c, o).run();
  const auto l0 = run::read_checkpoint_info(dir / "l0" / "pruned");
  EXPECT_EQ(l0.architecture.total(), 12);
  EXPECT_EQ(l0.config.model.activation, Activation::kSwish);
  EXPECT_FALSE(l0.vocab.pieces.empty());  // the piece list travels with the model
  const auto original = run::read_checkpoint_info(imported_checkpoint);
  EXPECT_EQ(l0.vocab.tgt_pieces.empty(), original.vocab.tgt_pieces.empty());
  c.prune.method = PruneMethod::kFisher;
  c.prune.distill_weight = 0;
  c.prune.recovery_steps = 0;
  c.prune.calibration_sentences = 16;
  o.run_dir = dir / "fisher";
  prune::fisher_prune_command(c, o);
  EXPECT_EQ(run::read_checkpoint_info(dir / "fisher" / "pruned").architecture.total(), 12);
  // Both export back to MarianMT.
  for (const char* run : {"l0", "fisher"}) {
    const auto r = interop::export_marian(dir / run / "pruned", dir / (std::string(run) + "-hf"),
                                          interop::ExportMode::kCompatible);
    EXPECT_LT(r.max_abs_logit_diff, 1e-5) << run;
  }
}

TEST(MarianImport, ImportedModelPrunesByL0AndFisherAndEvaluates) {
  TempDir dir;
  prune_and_export(imported(), dir);
}

// The error of importing a copy of the fixture folder `fixture` with files changed by `edit`
// ("(no error)" where it imports).
std::string import_error(const TempDir& dir, const fs::path& fixture,
                         const std::function<void(const fs::path&)>& edit) {
  const fs::path f = dir.path() / "broken";
  fs::remove_all(f);
  fs::copy(fixture, f);
  edit(f);
  fs::remove_all(dir.path() / "out");
  return testing::error_of([&] { interop::import_marian(f, dir.path() / "out"); });
}

TEST(MarianImport, MalformedFoldersAreClearErrors) {
  TempDir dir;
  auto error = [&](const std::function<void(const fs::path&)>& edit) {
    return import_error(dir, testing::test_data("marian-tiny"), edit);
  };
  auto edit_config = [](const std::function<void(json&)>& change) {
    return [change](const fs::path& f) {
      auto j = json::parse(io::read_file(f / "config.json"));
      change(j);
      io::write_file_atomic(f / "config.json", j.dump());
    };
  };
  auto has = [](const std::string& e, const std::string& what) {
    return e.find(what) != std::string::npos;
  };
  std::string e = error([](const fs::path& f) { fs::remove(f / "vocab.json"); });
  EXPECT_TRUE(has(e, "vocab.json: missing")) << e;
  e = error([](const fs::path& f) {
    fs::remove(f / "model.safetensors");
    fs::remove(f / "pytorch_model.bin");
  });
  EXPECT_TRUE(has(e, "neither model.safetensors nor pytorch_model.bin")) << e;
  e = error(edit_config([](json& j) { j["activation_function"] = "tanh"; }));
  EXPECT_TRUE(has(e, "config.json: \"activation_function\" is \"tanh\"")) << e;
  e = error(edit_config([](json& j) {
    j["encoder_ffn_dim"] = 48;
    j["decoder_ffn_dim"] = 48;
  }));
  EXPECT_TRUE(has(e,
                  "model.safetensors: model.encoder.layers.0.fc1.weight has shape [32, 16], "
                  "config.json gives [48, 16]"))
      << e;
  e = error(edit_config([](json& j) { j.erase("d_model"); }));
  EXPECT_TRUE(has(e, "config.json: no \"d_model\"")) << e;
  e = error(edit_config([](json& j) { j["decoder_start_token_id"] = 0; }));
  EXPECT_TRUE(has(e, "\"decoder_start_token_id\" (0) is not \"pad_token_id\" (121)")) << e;
  e = error([](const fs::path& f) {
    auto j = json::parse(io::read_file(f / "vocab.json"));
    j.erase("<unk>");
    io::write_file_atomic(f / "vocab.json", j.dump());
  });
  EXPECT_TRUE(has(e, "vocab.json: 121 pieces, but config.json's vocab_size is 122")) << e;
  e = error([](const fs::path& f) { io::write_file_atomic(f / "config.json", "{\"d_model\": "); });
  EXPECT_TRUE(has(e, "config.json: not valid JSON")) << e;
  e = error([](const fs::path& f) { io::write_file_atomic(f / "source.spm", "not a model"); });
  EXPECT_TRUE(has(e, "source.spm: not a valid SentencePiece model")) << e;
  e = error([](const fs::path& f) {
    auto st = model::read_safetensors(f / "model.safetensors");
    st.tensors.emplace_back("model.encoder.extra.weight", torch::zeros({2}));
    model::write_safetensors(f / "model.safetensors", st);
  });
  EXPECT_TRUE(has(e, "tensors the MarianMT model does not have: model.encoder.extra.weight")) << e;
  // Export needs an imported model.
  e = testing::error_of([&] {
    interop::export_marian(dir.path() / "nothing", dir.path() / "x", interop::ExportMode::kNative);
  });
  EXPECT_TRUE(has(e, "nothing")) << e;
}

TEST(MarianImport, RelevanceRefusesNonReluModels) {
  // The imported model's FFN is swish: relevance propagation's ReLU rule would be wrong there.
  auto m = load(imported());
  EXPECT_EQ(m->config().activation, Activation::kSwish);
  const auto e = testing::error_of([&] {
    analysis::propagate_relevance(*m, torch::tensor({5, 6, 3}), torch::tensor({2, 7}), 1e-6);
  });
  EXPECT_NE(e.find("model.activation is swish"), std::string::npos) << e;
}

// The reference's teacher-forced logits (within 1e-4) and greedy decodes of every case, by a model
// whose ids are Marian's through ids(); returns the largest logit difference.
double expect_reference_outputs(model::Transformer& m, const json& reference) {
  torch::NoGradGuard ng;
  const int64_t steps = reference["greedy_max_new_tokens"].get<int64_t>();
  double worst = 0;
  for (const auto& c : reference["cases"]) {
    const auto src = row(to_headcount(c["input_ids"]));
    const auto logits = m->forward(src, row(to_headcount(c["decoder_input_ids"])));
    const auto diff = (marian_order(logits[0]) - tensor_of(c["logits"])).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << c["source"];
    worst = std::max(worst, diff);
    decode::TransformerStepper stepper(m, src, 1);
    const auto hyp = decode::greedy_search(stepper, {steps});
    // The reference's output starts with the decoder start (pad) and keeps </s>; headcount's
    // hypothesis has neither.
    auto want = to_headcount(c["greedy"]["output_ids"]);
    want.erase(want.begin());
    if (c["greedy"]["stopped_at_eos"].get<bool>()) want.pop_back();
    EXPECT_EQ(hyp[0].tokens, want) << c["source"];
  }
  return worst;
}

// --- NumPy .npz (Marian's checkpoint format) -----------------------------------------------------

// tests/data/npz: the same arrays stored and deflated by numpy, described in arrays.json.
TEST(Npz, ReadsEveryDtypeStoredAndDeflatedAsNumpyWroteThem) {
  const fs::path dir = testing::test_data("npz");
  const json want = json::parse(io::read_file(dir / "arrays.json"));
  const std::map<std::string, torch::ScalarType> dtypes = {
      {"<f4", torch::kFloat32}, {"<f8", torch::kFloat64}, {"<f2", torch::kHalf},
      {"|i1", torch::kInt8},    {"|u1", torch::kByte},    {"<i8", torch::kInt64}};
  for (const char* file : {"arrays.npz", "arrays-compressed.npz"}) {
    const auto got = interop::read_npz(dir / file);
    ASSERT_EQ(got.size(), want.size()) << file;
    for (const auto& [name, w] : want.items()) {
      ASSERT_TRUE(got.count(name)) << file << " " << name;
      const auto& t = got.at(name);
      EXPECT_EQ(t.scalar_type(), dtypes.at(w["dtype"].get<std::string>())) << name;
      EXPECT_EQ(t.sizes().vec(), w["shape"].get<std::vector<int64_t>>()) << name;
      EXPECT_TRUE(t.is_contiguous()) << name;
      // Values in C order, as numpy's ravel gives them (Fortran-ordered data transposed back).
      const auto values = w["values"].get<std::vector<double>>();
      const auto flat = t.to(torch::kFloat64).reshape({-1});
      ASSERT_EQ(flat.numel(), static_cast<int64_t>(values.size())) << name;
      for (size_t i = 0; i < values.size(); ++i)
        EXPECT_EQ(flat[static_cast<int64_t>(i)].item<double>(), values[i]) << name << " " << i;
    }
  }
}

TEST(Npz, RefusesBigEndianTruncatedAndForeignFiles) {
  TempDir dir;
  const fs::path npz = testing::test_data("npz");
  auto has = [](const std::string& e, const std::string& what) {
    return e.find(what) != std::string::npos;
  };
  std::string e = testing::error_of([&] { interop::read_npz(npz / "big-endian.npz"); });
  EXPECT_TRUE(has(e, "big-endian.npz: swapped.npy: dtype '>f4' is big-endian")) << e;
  const std::string bytes = io::read_file(npz / "arrays.npz");
  io::write_file_atomic(dir / "cut.npz", bytes.substr(0, bytes.size() / 2));
  e = testing::error_of([&] { interop::read_npz(dir / "cut.npz"); });
  EXPECT_TRUE(has(e, "cut.npz")) << e;
  io::write_file_atomic(dir / "text.npz", "not a zip\n");
  e = testing::error_of([&] { interop::read_npz(dir / "text.npz"); });
  EXPECT_TRUE(has(e, "text.npz: not a zip archive")) << e;
  e = testing::error_of([&] { interop::read_npz(dir / "absent.npz"); });
  EXPECT_TRUE(has(e, "absent.npz: no such file")) << e;
  // .npy headers by hand: version 1, '<f4', shape (2,), and 8 bytes of data.
  auto npy = [](const std::string& dict, size_t data_bytes) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64 != 0) h += ' ';
    h += '\n';
    std::string b = std::string("\x93NUMPY\x01\x00", 8);
    b += static_cast<char>(h.size() & 0xff);
    b += static_cast<char>(h.size() >> 8);
    return b + h + std::string(data_bytes, '\0');
  };
  const auto ok =
      interop::parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8), "x");
  EXPECT_EQ(ok.sizes().vec(), (std::vector<int64_t>{2}));
  e = testing::error_of([&] {
    interop::parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8), "x");
  });
  EXPECT_TRUE(has(e, "x: shape (3,) of '<f4' needs 12 bytes of data, the file holds 8")) << e;
  e = testing::error_of([&] {
    interop::parse_npy(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8), "x");
  });
  EXPECT_TRUE(has(e, "x: dtype '<c8' is not one headcount reads")) << e;
  e = testing::error_of([&] { interop::parse_npy("PK\x03\x04 not npy", "x"); });
  EXPECT_TRUE(has(e, "x: not a .npy array")) << e;
}

// --- Marian's native layout (model.npz, vocab.yml, decoder.yml) ----------------------------------

// tests/data/marian-tiny-npz: marian-tiny in Marian's layout, with reference outputs of the model
// HF's converter makes of it (a zero <pad> row; tests/reference/marian_npz_reference.py).
const json& npz_reference() {
  static const json r =
      json::parse(io::read_file(testing::test_data("marian-tiny-npz") / "reference.json"));
  return r;
}

const fs::path& imported_npz() {
  return imported_fixture("marian-tiny-npz");
}

TEST(MarianNativeImport, LogitsAndGreedyDecodesMatchTheReference) {
  auto m = load(imported_npz());
  EXPECT_EQ(m->architecture().summary(), "8/8/8");
  EXPECT_EQ(m->config().activation, Activation::kSwish);
  const double worst = expect_reference_outputs(m, npz_reference());
  std::printf("Marian .npz import: max |logit - reference| over the cases: %.3g\n", worst);
  // The same tokenisation as the HF folder's import (the same SentencePiece models and pieces).
  const auto a = run::read_checkpoint_info(imported_npz());
  const auto b = run::read_checkpoint_info(imported());
  EXPECT_EQ(data::Vocab::load(a.vocab.src_model).encode("Y dijo Dios: “luz”."),
            data::Vocab::load(b.vocab.src_model).encode("Y dijo Dios: “luz”."));
}

TEST(MarianNativeImport, ExportsToTheHuggingFaceLayoutAsTheirConverterDoes) {
  TempDir dir;
  const auto r =
      interop::export_marian(imported_npz(), dir.path() / "hf", interop::ExportMode::kCompatible);
  EXPECT_EQ(r.max_abs_logit_diff, 0.0);
  // The folder HF's convert_marian_to_pytorch.py would write: marian-tiny's config.json values
  // (but max_position_embeddings, 512 as in OPUS-MT's configs), its vocab.json, and its tensors
  // with the <pad> row and bias entry zero.
  const fs::path tiny = testing::test_data("marian-tiny");
  const auto config = json::parse(io::read_file(dir.path() / "hf" / "config.json"));
  const auto want = json::parse(io::read_file(tiny / "config.json"));
  for (const char* key :
       {"vocab_size", "decoder_vocab_size", "d_model", "encoder_layers", "decoder_layers",
        "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim",
        "activation_function", "pad_token_id", "eos_token_id", "decoder_start_token_id",
        "scale_embedding", "share_encoder_decoder_embeddings", "bad_words_ids"})
    EXPECT_EQ(config.at(key), want.at(key)) << key;
  EXPECT_EQ(config.at("max_position_embeddings"), 512);
  EXPECT_EQ(json::parse(io::read_file(dir.path() / "hf" / "vocab.json")),
            json::parse(io::read_file(tiny / "vocab.json")));
  auto orig = tensors(tiny);
  orig.at("model.shared.weight")[121].zero_();
  orig.at("final_logits_bias")[0][121].zero_();
  expect_same_tensors(orig, dir.path() / "hf");
}

// A copy of the model.npz with special:model.yml replaced by `yml` (a zip written with minizip).
void rewrite_model_yml(const fs::path& npz, const std::string& yml) {
  std::map<std::string, std::string> members;
  unzFile in = unzOpen64(npz.string().c_str());
  ASSERT_NE(in, nullptr);
  for (int rc = unzGoToFirstFile(in); rc == UNZ_OK; rc = unzGoToNextFile(in)) {
    unz_file_info64 info;
    char name[256];
    unzGetCurrentFileInfo64(in, &info, name, sizeof(name), nullptr, 0, nullptr, 0);
    std::string bytes(info.uncompressed_size, '\0');
    unzOpenCurrentFile(in);
    unzReadCurrentFile(in, bytes.data(), static_cast<unsigned>(bytes.size()));
    unzCloseCurrentFile(in);
    members[name] = bytes;
  }
  unzClose(in);
  std::string h = "{'descr': '|i1', 'fortran_order': False, 'shape': (" +
                  std::to_string(yml.size() + 1) + ",), }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  members["special:model.yml.npy"] =
      std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size() & 0xff) +
      static_cast<char>(h.size() >> 8) + h + yml + std::string(1, '\0');
  zipFile out = zipOpen64(npz.string().c_str(), APPEND_STATUS_CREATE);
  ASSERT_NE(out, nullptr);
  for (const auto& [name, bytes] : members) {
    zipOpenNewFileInZip64(out, name.c_str(), nullptr, nullptr, 0, nullptr, 0, nullptr, 0, 0, 0);
    zipWriteInFileInZip(out, bytes.data(), static_cast<unsigned>(bytes.size()));
    zipCloseFileInZip(out);
  }
  zipClose(out, nullptr);
}

TEST(MarianNativeImport, MalformedFoldersAreClearErrors) {
  TempDir dir;
  const fs::path src = testing::test_data("marian-tiny-npz");
  const std::string yml = [&] {
    const auto npz = interop::read_npz(src / "model.npz");
    const auto t = npz.at("special:model.yml");
    return std::string(reinterpret_cast<const char*>(t.data_ptr()),
                       static_cast<size_t>(t.numel() - 1));
  }();
  auto error = [&](const std::function<void(const fs::path&)>& edit) {
    return import_error(dir, src, edit);
  };
  auto has = [](const std::string& e, const std::string& what) {
    return e.find(what) != std::string::npos;
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    return [&, from, to](const fs::path& f) {
      std::string y = yml;
      const auto at = y.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      y.replace(at, from.size(), to);
      rewrite_model_yml(f / "model.npz", y);
    };
  };
  // The rewritten archive itself imports (the helper is sound).
  EXPECT_EQ(error(replace("dim-emb: 16", "dim-emb: 16")), "(no error)");
  std::string e = error([](const fs::path& f) { fs::remove(f / "vocab.yml"); });
  EXPECT_TRUE(has(e, "vocab.yml: missing")) << e;
  e = error([](const fs::path& f) {
    io::write_file_atomic(f / "decoder.yml", "models: [model.npz]\nvocabs: [a.yml, b.yml]\n");
  });
  EXPECT_TRUE(has(e, "a.yml: missing")) << e;
  e = error([](const fs::path& f) {
    fs::copy_file(f / "vocab.yml", f / "other.yml");
    io::write_file_atomic(f / "decoder.yml",
                          "models: [model.npz]\nvocabs: [vocab.yml, other.yml]\n");
  });
  EXPECT_TRUE(has(e, "but one embedding for both sides")) << e;
  e = error([](const fs::path& f) {
    fs::remove(f / "decoder.yml");
    fs::copy_file(f / "model.npz", f / "other.npz");
  });
  EXPECT_TRUE(has(e, "2 *.npz files and no decoder.yml")) << e;
  e = error(replace("transformer-preprocess: \"\"", "transformer-preprocess: n"));
  EXPECT_TRUE(has(e, "model.npz: special:model.yml: \"transformer-preprocess\" is \"n\"")) << e;
  e = error(replace("transformer-ffn-activation: swish", "transformer-ffn-activation: tanh"));
  EXPECT_TRUE(has(e, "\"transformer-ffn-activation\" is \"tanh\"")) << e;
  e = error(replace("transformer-dim-ffn: 32", "transformer-dim-ffn: 48"));
  EXPECT_TRUE(has(e, "model.npz: encoder_l1_ffn_W1 has shape [16, 32], model.yml gives [16, 48]"))
      << e;
  e = error(replace("tied-embeddings-all: true", "tied-embeddings-all: false"));
  // Separate embeddings (tied-embeddings-src is false in the fixture) that the file lacks.
  EXPECT_TRUE(has(e, "model.npz: no array encoder_Wemb (expected shape [121, 16])")) << e;
  e = error([](const fs::path& f) {
    std::string v = io::read_file(f / "vocab.yml");
    v.erase(v.find("\"<unk>\": 1\n"), 11);
    io::write_file_atomic(f / "vocab.yml", v);
  });
  EXPECT_TRUE(has(e, "vocab.yml")) << e;
  e = error([](const fs::path& f) {
    io::write_file_atomic(f / "vocab.yml", io::read_file(f / "vocab.yml") + "\"x\": 7\n");
  });
  EXPECT_TRUE(has(e, "id 7 is given to two pieces")) << e;
  e = error([](const fs::path& f) { io::write_file_atomic(f / "model.npz", "PK"); });
  EXPECT_TRUE(has(e, "model.npz: not a zip archive")) << e;
  e = error([](const fs::path& f) {
    fs::remove(f / "decoder.yml");
    fs::remove(f / "model.npz");
  });
  EXPECT_TRUE(has(e, "neither a Hugging Face MarianMT folder")) << e;
}

// --- Separate source and target vocabularies -----------------------------------------------------

// tests/data/marian-tiny-separate: vocab.json (source) and target_vocab.json (the same pieces with
// other ids), the encoder's and the decoder's own embeddings
// (tests/reference/marian_npz_reference.py).
TEST(MarianSeparateVocabularies, TokenisationLogitsAndGreedyDecodesMatchTheReference) {
  TempDir dir;
  const fs::path src_dir = testing::test_data("marian-tiny-separate");
  const json r = json::parse(io::read_file(src_dir / "reference.json"));
  interop::import_marian(src_dir, dir.path() / "ckpt");
  const auto info = run::read_checkpoint_info(dir.path() / "ckpt");
  ASSERT_FALSE(info.vocab.tgt_pieces.empty());
  EXPECT_NE(data::read_piece_list(info.vocab.pieces), data::read_piece_list(info.vocab.tgt_pieces));
  const auto src_vocab = data::Vocab::load(info.vocab.src_model);
  const auto tgt_vocab = data::Vocab::load(info.vocab.tgt_model);
  auto m = load(dir.path() / "ckpt");
  EXPECT_FALSE(m->config().tie_embeddings);
  // Each side's text through its own vocabulary.
  for (const auto& c : r["cases"]) {
    auto s = src_vocab.encode(c["source"].get<std::string>());
    s.push_back(data::kEosId);
    EXPECT_EQ(std::vector<int64_t>(s.begin(), s.end()), to_headcount(c["input_ids"]));
    auto t = tgt_vocab.encode(c["target"].get<std::string>());
    t.push_back(data::kEosId);
    EXPECT_EQ(std::vector<int64_t>(t.begin(), t.end()), to_headcount(c["labels"])) << c["target"];
  }
  const double worst = expect_reference_outputs(m, r);
  std::printf("separate vocabularies: max |logit - reference| over the cases: %.3g\n", worst);
}

TEST(MarianSeparateVocabularies, ImportedModelPrunesByL0AndFisherAndExports) {
  TempDir dir;
  interop::import_marian(testing::test_data("marian-tiny-separate"), dir.path() / "ckpt");
  TempDir runs;
  prune_and_export(dir.path() / "ckpt", runs);
  // Fine-tuned apart from the decoder's embedding, the output matrix is exported as lm_head.
  const auto config = json::parse(io::read_file(runs.path() / "l0-hf" / "config.json"));
  EXPECT_EQ(config.at("tie_word_embeddings"), false);
  EXPECT_TRUE(tensors(runs.path() / "l0-hf").count("lm_head.weight"));
  EXPECT_TRUE(fs::exists(runs.path() / "l0-hf" / "target_vocab.json"));
}

TEST(MarianSeparateVocabularies, ExportGivesBackTheFolderAndErrorsNameTheFile) {
  TempDir dir;
  const fs::path src_dir = testing::test_data("marian-tiny-separate");
  interop::import_marian(src_dir, dir.path() / "ckpt");
  const auto r =
      interop::export_marian(dir.path() / "ckpt", dir.path() / "hf", interop::ExportMode::kNative);
  EXPECT_EQ(r.max_abs_logit_diff, 0.0);
  const auto orig = tensors(src_dir);
  // No lm_head: the output is still the decoder's embedding (tied).
  expect_same_tensors(orig, dir.path() / "hf");
  for (const char* f : {"vocab.json", "target_vocab.json", "tokenizer_config.json"})
    EXPECT_EQ(json::parse(io::read_file(dir.path() / "hf" / f)),
              json::parse(io::read_file(src_dir / f)))
        << f;
  auto config = json::parse(io::read_file(dir.path() / "hf" / "config.json"));
  config.erase("headcount_heads");
  EXPECT_EQ(config, json::parse(io::read_file(src_dir / "config.json")));
  // Malformed: the target vocabulary missing, or its specials elsewhere.
  auto error = [&](const std::function<void(const fs::path&)>& edit) {
    return import_error(dir, src_dir, edit);
  };
  std::string e = error([](const fs::path& f) { fs::remove(f / "target_vocab.json"); });
  EXPECT_NE(e.find("target_vocab.json: missing"), std::string::npos) << e;
  e = error([](const fs::path& f) {
    auto j = json::parse(io::read_file(f / "target_vocab.json"));
    const auto other = std::find_if(j.begin(), j.end(), [](const json& v) { return v == 5; });
    *other = 1;
    j["<unk>"] = 5;
    io::write_file_atomic(f / "target_vocab.json", j.dump());
  });
  EXPECT_NE(e.find("target_vocab.json: id 1 is"), std::string::npos) << e;
  EXPECT_NE(e.find("must give the specials the same ids"), std::string::npos) << e;
}

// tests/data/marian-tiny-separate-npz: marian-tiny-separate in Marian's layout (*.src.vocab.yml,
// *.trg.vocab.yml, encoder_Wemb and decoder_Wemb), reference outputs of HF's conversion of it.
TEST(MarianSeparateVocabularies, MarianLayoutMatchesTheReferenceAndExportsAsHfConverts) {
  TempDir dir;
  const fs::path src_dir = testing::test_data("marian-tiny-separate-npz");
  const json r = json::parse(io::read_file(src_dir / "reference.json"));
  interop::import_marian(src_dir, dir.path() / "ckpt");
  const auto info = run::read_checkpoint_info(dir.path() / "ckpt");
  ASSERT_FALSE(info.vocab.tgt_pieces.empty());
  const auto tgt_vocab = data::Vocab::load(info.vocab.tgt_model);
  auto m = load(dir.path() / "ckpt");
  const json sep =
      json::parse(io::read_file(testing::test_data("marian-tiny-separate") / "reference.json"));
  for (size_t i = 0; i < r["cases"].size(); ++i) {
    auto t = tgt_vocab.encode(sep["cases"][i]["target"].get<std::string>());
    t.push_back(data::kEosId);
    EXPECT_EQ(std::vector<int64_t>(t.begin(), t.end()), to_headcount(r["cases"][i]["labels"]));
  }
  expect_reference_outputs(m, r);
  // Exported: marian-tiny-separate's folder with the <pad> rows and logit bias zero.
  const auto e = interop::export_marian(dir.path() / "ckpt", dir.path() / "hf",
                                        interop::ExportMode::kCompatible);
  EXPECT_EQ(e.max_abs_logit_diff, 0.0);
  const fs::path hf_dir = testing::test_data("marian-tiny-separate");
  auto orig = tensors(hf_dir);
  orig.at("model.encoder.embed_tokens.weight")[121].zero_();
  orig.at("model.decoder.embed_tokens.weight")[121].zero_();
  orig.at("final_logits_bias")[0][121].zero_();
  expect_same_tensors(orig, dir.path() / "hf");
  for (const char* f : {"vocab.json", "target_vocab.json"})
    EXPECT_EQ(json::parse(io::read_file(dir.path() / "hf" / f)),
              json::parse(io::read_file(hf_dir / f)))
        << f;
  const auto config = json::parse(io::read_file(dir.path() / "hf" / "config.json"));
  EXPECT_EQ(config.at("share_encoder_decoder_embeddings"), false);
  EXPECT_EQ(config.at("tie_word_embeddings"), true);
}

}  // namespace
}  // namespace headcount
