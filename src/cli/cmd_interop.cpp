// headcount import / export: MarianMT models (OPUS-MT) in and out.
#include <cstdio>

#include "commands.h"
#include "headcount/interop/marian.h"

namespace headcount::cli {

void add_import_command(CLI::App& app) {
  auto folder = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "import",
      "Turn a MarianMT model into a headcount checkpoint that every command takes (eval, "
      "translate, prune, analyze, bench decode): a Hugging Face folder (config.json, "
      "model.safetensors or pytorch_model.bin, source.spm, target.spm, vocab.json) or Marian's "
      "own layout as OPUS-MT releases it (the .npz and vocab.yml that decoder.yml names, "
      "source.spm, target.spm)");
  cmd->add_option("folder", *folder, "The model's folder")->required();
  cmd->add_option("--out", *out, "New checkpoint folder")->required()->check(output_folder());
  cmd->callback([folder, out] {
    const auto r = interop::import_marian(*folder, *out);
    std::printf("wrote %s: heads %s (enc/dec/enc-dec), %lld pieces, %lld parameters, from %s\n",
                out->c_str(), r.architecture.summary().c_str(),
                static_cast<long long>(r.vocab_size), static_cast<long long>(r.parameters),
                r.weights_file.c_str());
  });
}

void add_export_command(CLI::App& app) {
  auto checkpoint = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto native = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "export",
      "Write an imported MarianMT model (pruned, fine-tuned or as imported) back as a MarianMT "
      "folder. Compatible (default): every layer keeps the config's head count, removed heads "
      "zero-filled, so stock loaders (transformers, CTranslate2's converter) read it and compute "
      "what the pruned model computes; --native: per-layer head counts (config.json "
      "\"headcount_heads\"), smaller, read by `headcount import`");
  cmd->add_option("--checkpoint", *checkpoint, "Checkpoint folder")
      ->required()
      ->check(checkpoint_folder());
  cmd->add_option("--out", *out, "New MarianMT folder")->required()->check(output_folder());
  cmd->add_flag("--native", *native, "Per-layer head counts instead of zero-filled heads");
  cmd->callback([checkpoint, out, native] {
    const auto r = interop::export_marian(
        *checkpoint, *out,
        *native ? interop::ExportMode::kNative : interop::ExportMode::kCompatible);
    std::printf(
        "wrote %s (%s): heads %s (enc/dec/enc-dec), %lld tensors, %.1f MB; read back, its logits "
        "differ from the checkpoint's by at most %.3g\n",
        out->c_str(), *native ? "native" : "compatible", r.architecture.summary().c_str(),
        static_cast<long long>(r.tensors), static_cast<double>(r.bytes) / 1e6,
        r.max_abs_logit_diff);
  });
}

}  // namespace headcount::cli
