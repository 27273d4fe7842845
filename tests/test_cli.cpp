// The headcount executable: help, exit codes, one-line errors, bleu output and --dump-config.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/wait.h>
#include <torch/cuda.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "headcount/common/io.h"
#include "headcount/common/precision.h"
#include "headcount/common/runtime.h"
#include "test_util.h"
#include "tiny_corpus.h"

namespace headcount {
namespace {

using testing::TempDir;

using Result = testing::CommandResult;

Result run_env(const std::string& env, const std::string& args) {
  return testing::run_headcount(env, args);
}

Result run(const std::string& args) {
  return run_env("", args);
}

size_t count_lines(const std::string& s) {
  return std::count(s.begin(), s.end(), '\n');
}

TEST(Cli, HelpListsEveryCommand) {
  const auto r = run("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"data", "vocab", "bleu", "config", "bench"}) {
    EXPECT_NE(r.out.find(c), std::string::npos) << c;
  }
  EXPECT_EQ(run("bleu --help").code, 0);
  EXPECT_EQ(run("data bible --help").code, 0);
}

TEST(Cli, ErrorsAreOneLineAndNonZero) {
  TempDir dir;
  auto r = run("config show --set vocab.size=lots");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("vocab.size: expected an integer, got 'lots'"), std::string::npos) << r.err;

  std::ofstream(dir / "bad.yaml") << "data:\n  max_tokns: 3\n";
  r = run(fmt::format("config show {}", (dir / "bad.yaml").string()));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("bad.yaml:2: unknown key 'data.max_tokns'; did you mean 'data.max_tokens'?"),
            std::string::npos)
      << r.err;

  std::ofstream(dir / "h.txt") << "a b\nc d\n";
  std::ofstream(dir / "r.txt") << "a b\n";
  r = run(fmt::format("bleu {} {}", (dir / "h.txt").string(), (dir / "r.txt").string()));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("must be line-aligned"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;

  EXPECT_NE(run("no-such-command").code, 0);
  EXPECT_NE(run("bleu --tokenize klingon x y").code, 0);
}

TEST(Cli, BleuPlainAndJsonOutput) {
  TempDir dir;
  std::ofstream(dir / "hyp") << "The dog bit the man.\nIt wasn't surprising.\nThe man had just "
                                "bitten him.\n";
  std::ofstream(dir / "ref1") << "The dog bit the man.\nIt was not unexpected.\nThe man bit him "
                                 "first.\n";
  std::ofstream(dir / "ref2") << "The dog had bit the man.\nNo one was surprised.\nThe man had "
                                 "bitten the dog.\n";
  const std::string files = fmt::format("{} {} {}", (dir / "hyp").string(), (dir / "ref1").string(),
                                        (dir / "ref2").string());
  auto r = run("bleu " + files);
  EXPECT_EQ(r.code, 0) << r.err;
  // sacreBLEU's README example, printed as `sacrebleu -f text` prints it.
  EXPECT_EQ(r.out,
            "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 48.53 "
            "82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n");
  r = run("bleu --json " + files);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["score"].get<double>(), 48.530827009929865, 1e-9);
  EXPECT_EQ(j["counts"], nlohmann::json::parse("[14, 7, 5, 3]"));
  EXPECT_EQ(j["totals"], nlohmann::json::parse("[17, 14, 11, 8]"));
  EXPECT_EQ(j["sys_len"], 17);
  EXPECT_EQ(j["ref_len"], 18);
  EXPECT_EQ(j["signature"], "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  r = run("bleu --metric chrf " + files);
  EXPECT_EQ(r.out, "chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = 59.73\n");
  r = run("bleu --sentence -b " + files);
  EXPECT_EQ(count_lines(r.out), 3u);
  EXPECT_EQ(r.out.substr(0, 7), "100.00\n");
  r = run("bleu --metric chrf --chrf-word-order 2 -b " + files);
  EXPECT_EQ(r.code, 0);

  // A paired test of the hypothesis against a baseline hypothesis: the references themselves
  // are perfect, so no resample reaches their gap to hyp and p = 1/(n+1).
  const std::string ref1 = (dir / "ref1").string(), hyp = (dir / "hyp").string();
  r = run(fmt::format("bleu --json --paired-bs {} --paired-n 99 {} {}", hyp, ref1, ref1));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto p = nlohmann::json::parse(r.out);
  EXPECT_EQ(p["test"], "bs");
  EXPECT_EQ(p["samples"], 99);
  EXPECT_DOUBLE_EQ(p["system"]["score"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(p["system"]["p_value"].get<double>(), 0.01);
  r = run(fmt::format("bleu --paired-ar {} {} {}", hyp, ref1, ref1));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("paired approximate randomization, 10000 trials, seed 12345"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("difference +"), std::string::npos) << r.out;
  // Misaligned files, or a paired test with --sentence: one-line errors.
  std::ofstream(dir / "short") << "one line\n";
  r = run(fmt::format("bleu --paired-bs {} {} {}", (dir / "short").string(), hyp, ref1));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("has 1 lines but the hypothesis"), std::string::npos) << r.err;
  r = run(fmt::format("bleu --sentence --paired-bs {} {} {}", hyp, hyp, ref1));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;
}

TEST(Cli, DumpConfigPrintsTheResolvedConfig) {
  const auto r = run("config show --set vocab.size=1234 --set data.dir=/x");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("size: 1234"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dir: /x"), std::string::npos) << r.out;
  const auto v = run("vocab --dump-config --set vocab.model_type=bpe");
  EXPECT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.out.find("model_type: bpe"), std::string::npos);
}

}  // namespace
}  // namespace headcount

namespace headcount {
namespace {

TEST(Cli, WarnsAboutASlowReferenceBlas) {
  const std::filesystem::path reference = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
  if (!std::filesystem::exists(reference))
    GTEST_SKIP() << "the reference BLAS (libblas3) is not installed";
  auto r = run("--version");
  EXPECT_EQ(r.err.find("slow BLAS"), std::string::npos) << r.err;
  // Force the reference BLAS in front of OpenBLAS, as a machine without OpenBLAS would have it.
  r = run_env("LD_LIBRARY_PATH=" + reference.parent_path().string(), "--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.err.find("slow BLAS"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("apt-get install libopenblas0-pthread"), std::string::npos) << r.err;
}

// The kernel set named in `bench blas`'s "BLAS: OpenBLAS (OpenBLAS 0.3.21 ... SkylakeX
// MAX_THREADS=64)".
std::string openblas_kernels_of(const std::string& bench_blas_output) {
  const auto end = bench_blas_output.find(" MAX_THREADS");
  if (end == std::string::npos) return "";
  const auto start = bench_blas_output.rfind(' ', end - 1);
  return bench_blas_output.substr(start + 1, end - start - 1);
}

TEST(Cli, OpenBlasRunsKernelsTheCpuSupports) {
  if (runtime::openblas_corename().empty()) GTEST_SKIP() << "the BLAS is not OpenBLAS";
  const auto cpu = runtime::cpu_vector_features();
  // Left to itself: never a fallback set the CPU outgrew (Debian 12's OpenBLAS picks Prescott
  // for CPUs newer than itself; headcount restarts with a better OPENBLAS_CORETYPE).
  auto r = run_env("env -u OPENBLAS_CORETYPE -u HEADCOUNT_OPENBLAS_FALLBACK", "bench blas");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string chosen = openblas_kernels_of(r.out);
  ASSERT_FALSE(chosen.empty()) << r.out;
  EXPECT_EQ(runtime::better_openblas_coretype(chosen, cpu), "") << r.out;
  // The user's setting is kept, even a slow one, and nothing claims headcount chose it.
  r = run_env("env -u HEADCOUNT_OPENBLAS_FALLBACK OPENBLAS_CORETYPE=Prescott", "bench blas");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(openblas_kernels_of(r.out), "Prescott") << r.out;
  EXPECT_NE(r.out.find("kernel set chosen by OPENBLAS_CORETYPE=Prescott"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("set by headcount"), std::string::npos) << r.out;
}

TEST(Runtime, KeepFreedMemoryServesLargeBlocksFromTheHeapAndKeepsThem) {
  // glibc's defaults first: a 64 MB block is a fresh mmap, returned to the system when freed.
  constexpr size_t kBlock = 64u << 20;
  const size_t mapped_before = mallinfo2().hblkhd;
  void* p = std::malloc(kBlock);
  ASSERT_NE(p, nullptr);
  const bool default_mmaps = mallinfo2().hblkhd >= mapped_before + kBlock;
  std::free(p);
  if (!default_mmaps) GTEST_SKIP() << "this process already keeps large blocks in the heap";

  ASSERT_EQ(setenv("HEADCOUNT_RETURN_MEMORY", "1", 1), 0);
  EXPECT_FALSE(runtime::keep_freed_memory());  // opted out: nothing changed
  ASSERT_EQ(unsetenv("HEADCOUNT_RETURN_MEMORY"), 0);
  ASSERT_TRUE(runtime::keep_freed_memory());
  const auto before = mallinfo2();
  p = std::malloc(kBlock);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBlock);
  const auto during = mallinfo2();
  EXPECT_EQ(during.hblkhd, before.hblkhd);               // not mmap'd
  EXPECT_GE(during.uordblks, before.uordblks + kBlock);  // from the heap
  std::free(p);
  const auto after = mallinfo2();
  EXPECT_GE(after.arena, during.arena);  // the heap did not shrink
  EXPECT_GE(after.fordblks, kBlock);     // the block is free for the next allocation
  void* q = std::malloc(kBlock);
  EXPECT_EQ(mallinfo2().arena, after.arena);  // served from what was kept
  std::free(q);
}

TEST(Cli, BenchTrainReportsConsistentFigures) {
  const auto r = run(
      "bench train --d-model 16 --layers 1 --heads 2 --ffn 32 --vocab 50 --sentences 2 --length 4 "
      "--steps 2 --warmup 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens_per_step"].get<double>(), 8.0);
  EXPECT_NEAR(j["target_tokens_per_s"].get<double>(), 8.0 / j["step_seconds_median"].get<double>(),
              1e-6);
  // Multiply-adds by hand for 2 x 4 tokens, d=16, FFN 32, vocabulary 50, 1+1 layers:
  // encoder 8 * (4*16^2 + 2*16*32) + 2 sentences * 2*4*4*16 = 17,408; decoder (self and cross
  // attention) 8 * (8*16^2 + 2*16*32) + 2 * 4*4*4*16 = 26,624; output 8*16*50 = 6,400;
  // x 2 FLOPs x 3 (forward and two backward products) = 302,592.
  EXPECT_NEAR(j["gflop_per_step"].get<double>(), 302592e-9, 1e-12);
  ASSERT_TRUE(j.contains("page_faults_per_step") && j["page_faults_per_step"].is_number());
  EXPECT_GT(j["matmul_peak_gflops"].get<double>(), 0.0);
  EXPECT_NEAR(j["fraction_of_peak"].get<double>(),
              j["achieved_gflops"].get<double>() / j["matmul_peak_gflops"].get<double>(), 1e-9);
  // --precision fp32 is fp32 everywhere; bf16 where the CPU has it, else a clear error.
  const auto f = run(
      "bench train --d-model 16 --layers 1 --heads 2 --ffn 32 --vocab 50 --sentences 2 --length 4 "
      "--steps 1 --warmup 1 --json --precision fp32");
  ASSERT_EQ(f.code, 0) << f.err;
  EXPECT_EQ(nlohmann::json::parse(f.out)["precision"], "fp32");
  const auto b = run(
      "bench train --d-model 16 --layers 1 --heads 2 --ffn 32 --vocab 50 --sentences 2 --length 4 "
      "--steps 1 --warmup 1 --json --precision bf16");
  if (cpu_native_bf16().empty()) {
    EXPECT_NE(b.code, 0);
    EXPECT_NE(b.err.find("train.precision: bf16 needs native bf16 arithmetic"), std::string::npos)
        << b.err;
  } else {
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(nlohmann::json::parse(b.out)["precision"], "bf16");
  }
  const auto none = run_env(
      "HEADCOUNT_CPU_BF16=0",
      "bench train --d-model 16 --layers 1 --heads 2 --ffn 32 --vocab 50 --sentences 2 --length 4 "
      "--steps 1 --warmup 1 --json --precision bf16");
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.err.find("bf16 needs native bf16 arithmetic"), std::string::npos) << none.err;
}

TEST(Cli, BenchTrainGatedRunsTheLibrarysL0Pruning) {
  // The gated steps are prune::L0Pruning's, with the config's prune section: the default (every
  // head, all parts trained), and gates alone (prune.train_parts: []), whose frozen parameters
  // still train in the plain steps in between.
  for (const char* extra : {"", " --set 'prune.train_parts=[]' --set prune.lambda=0.5"}) {
    const auto r = run(std::string("bench train --d-model 16 --layers 1 --heads 2 --ffn 32 "
                                   "--vocab 50 --sentences 2 --length 4 --steps 2 --warmup 1 "
                                   "--gated") +
                       extra);
    ASSERT_EQ(r.code, 0) << extra << "\n" << r.err;
    EXPECT_NE(r.out.find("gated / plain = "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(2 alternating pairs)"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("pruning: gates on 6 heads"), std::string::npos) << r.err;
  }
}

// The benchmarks measure the config's `device` and say which; a device that cannot be used is an
// error, never a measurement of the CPU in its place. (On a GPU, test_cuda.cpp's Cuda.Bench*.)
TEST(Cli, BenchTrainReportsTheDeviceItMeasuredAndRefusesAMissingGpu) {
  const std::string shape =
      "bench train --d-model 16 --layers 1 --heads 2 --ffn 32 --vocab 50 --sentences 2 --length 4 "
      "--steps 1 --warmup 1 --precision fp32";
  const auto j = run(shape + " --json --set device=cpu");
  ASSERT_EQ(j.code, 0) << j.err;
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_EQ(json["device"], "cpu");
  EXPECT_EQ(json["matmul_peak_size"], 2048);
  EXPECT_FALSE(json.contains("tf32"));  // a CUDA setting
  const auto text = run(shape + " --set device=cpu");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("device: cpu\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("matmul peak measured now on cpu (2048^3)"), std::string::npos)
      << text.out;
  // auto: the GPU where LibTorch sees one, else the CPU.
  const auto automatic = run(shape + " --json");
  ASSERT_EQ(automatic.code, 0) << automatic.err;
  EXPECT_EQ(nlohmann::json::parse(automatic.out)["device"],
            torch::cuda::is_available() ? "cuda:0" : "cpu");
  if (torch::cuda::is_available()) return;
  for (const char* device : {"cuda", "cuda:1"}) {
    const auto r = run(shape + " --json --set device=" + device);
    EXPECT_NE(r.code, 0) << device;
    EXPECT_TRUE(r.out.empty()) << r.out;  // no figures of another device
    EXPECT_NE(
        r.err.find(fmt::format("device '{}' requested but LibTorch sees no CUDA device", device)),
        std::string::npos)
        << r.err;
  }
}

TEST(Cli, BenchDecodeReportsTheDeviceItMeasuredAndRefusesAMissingGpu) {
  TempDir dir;
  const auto ckpt = train_tiny_model(dir, 4).string();
  const std::string args = "bench decode --checkpoint " + ckpt +
                           " --sentences 2 --beams 1 --repeats 1 --set decode.precision=fp32";
  const auto r = run(args + " --set device=cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("repeats (alternating), device cpu\n"), std::string::npos) << r.out;
  if (torch::cuda::is_available()) return;
  const auto gpu = run(args + " --set device=cuda");
  EXPECT_NE(gpu.code, 0);
  EXPECT_TRUE(gpu.out.empty()) << gpu.out;
  EXPECT_NE(gpu.err.find("device 'cuda' requested but LibTorch sees no CUDA device"),
            std::string::npos)
      << gpu.err;
}

}  // namespace
}  // namespace headcount
