// headcount: the command-line entry point. A thin layer over the core library: it parses the
// command line, runs one subcommand, and turns any error into one line on stderr.
#include <c10/util/Exception.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "commands.h"
#include "headcount/common/check.h"
#include "headcount/common/log.h"
#include "headcount/common/runtime.h"

namespace headcount::cli {

// Every subcommand, in the order `headcount --help` lists them.
const CommandSpec kCommands[] = {
    // clang-format off
    {"data", add_data_command},
    {"vocab", add_vocab_command},
    {"train", add_train_command},
    {"prune", add_prune_command},
    {"export-pruned", add_export_pruned_command},
    {"import", add_import_command},
    {"export", add_export_command},
    {"average-checkpoints", add_average_command},
    {"sweep", add_sweep_command},
    {"report", add_report_command},
    {"reproduce", add_reproduce_command},
    {"table", add_table_command},
    {"analyze", add_analyze_command},
    {"launch", add_launch_command},
    {"translate", add_translate_command},
    {"eval", add_eval_command},
    {"bleu", add_bleu_command},
    {"config", add_config_command},
    {"bench", add_bench_command},
    // clang-format on
};

// The command names on the command line, checked before CLI11 parses it: CLI11 answers --help
// first, so `headcount no-such-command --help` would print the main help and exit 0. Walks down
// while the command has subcommands; options are skipped (those of headcount, analyze, bench,
// config and data take no values).
void check_command_names(const CLI::App& app, int argc, char** argv) {
  const CLI::App* current = &app;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-') continue;
    const auto subs = current->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) return;
    const CLI::App* found = nullptr;
    std::vector<std::string> names;
    for (const CLI::App* sub : subs) {
      names.push_back(sub->get_name());
      if (sub->check_name(arg)) found = sub;
    }
    HC_CHECK(found, "unknown command '{}{}'; expected one of: {}", path, arg,
             fmt::join(names, ", "));
    path += arg + " ";
    current = found;
  }
}

int& exit_status() {
  static int status = 0;
  return status;
}

std::vector<std::string>& args_after_dash_dash() {
  static std::vector<std::string> args;
  return args;
}

// CLI11 reads integers with strtoll in base 0, where a leading zero makes "010" octal 8: a
// number on the command line is decimal, as in a config file (common/config.cpp).
void decimal_integers(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string type = o->get_type_name();
    if (type.rfind("INT", 0) != 0 && type.rfind("UINT", 0) != 0) continue;
    o->transform(CLI::Validator(
        [](std::string& v) {
          const size_t digits = v.find_first_not_of("+-");
          if (digits > 1 || digits == std::string::npos) return std::string();
          const size_t first = v.find_first_not_of('0', digits);
          const bool decimal = v.find_first_not_of("0123456789", digits) == std::string::npos;
          if (decimal && first != digits)
            v.erase(digits, (first == std::string::npos ? v.size() - 1 : first) - digits);
          return std::string();
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) decimal_integers(*sub);
}

}  // namespace headcount::cli

int main(int argc, char** argv) {
  using namespace headcount;
  runtime::restart_with_better_blas_kernels(argv);  // first: it may re-execute the program
  runtime::keep_freed_memory();                     // before the first large tensor; see runtime.h
  CLI::App app{
      "headcount: find out which attention heads of a Transformer translation model matter, and "
      "remove the rest.",
      "headcount"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("headcount ") + HEADCOUNT_VERSION);
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Print debug messages");
  app.add_flag("-q,--quiet", quiet, "Print warnings and errors only");
  app.parse_complete_callback([&] {
    if (verbose) log::set_level(log::Level::kDebug);
    if (quiet) log::set_level(log::Level::kWarn);
  });
  for (const auto& spec : cli::kCommands) spec.add(app);
  cli::decimal_integers(app);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      cli::args_after_dash_dash().assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }

  const bool debug = std::getenv("HEADCOUNT_DEBUG") != nullptr;
  try {
    cli::check_command_names(app, argc, argv);
    runtime::warn_if_slow_blas();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::fprintf(stderr, "headcount: error: %s\n", e.what());
    if (debug) std::fprintf(stderr, "  (raised at %s)\n", e.where().c_str());
    return 1;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "headcount: error (LibTorch): %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headcount: error: %s\n", e.what());
    return 1;
  }
  // What a full disk (or /dev/full) did not take is an error, not a silent success.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "headcount: error: standard output: write failed: %s\n",
                 errno != 0 ? std::strerror(errno) : "disk full?");
    return 1;
  }
  return cli::exit_status();
}
