// headcount table: tables of evaluated runs from their records, with paired tests against named
// runs; optionally the generated section of an experiment README.
#include <cstdio>

#include "commands.h"
#include "headcount/sweep/reproduce.h"
#include "headcount/sweep/table.h"

namespace headcount::cli {

void add_table_command(CLI::App& app) {
  struct Args {
    std::string file, readme;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "table",
      "Tables of evaluated runs from their records (eval-SPLIT.json, kept translations, "
      "summary.json): BLEU, chrF, heads, differences with paired bootstrap p-values against named "
      "runs, and where each run was trained and decoded");
  cmd->add_option("tables", a->file,
                  "Table file (YAML): splits, runs (name: folder), tables (title, against, rows)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--readme", a->readme,
                  "Write the tables into this README, between its lines \"" +
                      std::string(sweep::kTableBegin) + "\" and \"" + sweep::kTableEnd +
                      "\", instead of printing them")
      ->check(CLI::ExistingFile);
  cmd->callback([a] {
    const auto spec = sweep::load_table_spec(a->file);
    const std::string tables = sweep::render_tables(spec);
    if (a->readme.empty()) {
      std::printf("%s", tables.c_str());
      return;
    }
    sweep::replace_readme_section(a->readme, tables, sweep::kTableBegin, sweep::kTableEnd);
    std::printf("wrote the generated section of %s\n", a->readme.c_str());
  });
}

}  // namespace headcount::cli
