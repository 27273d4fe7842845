// `headcount reproduce`: the plan of an experiment and the runner that carries it out.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <set>

#include "headcount/analysis/compare.h"
#include "headcount/bench/train.h"
#include "headcount/common/check.h"
#include "headcount/common/io.h"
#include "headcount/common/log.h"
#include "headcount/common/process.h"
#include "headcount/common/provenance.h"
#include "headcount/common/run_guard.h"
#include "headcount/common/runtime.h"
#include "headcount/common/signals.h"
#include "headcount/run/run_folder.h"
#include "headcount/sweep/reproduce.h"
#include "headcount/train/trainer.h"
#include "sweep/sweep_yaml.h"

namespace headcount::sweep {
namespace {

using json = nlohmann::json;

// Estimates before anything has been measured on this machine: a 1,200-step pruning run of the
// Bible baseline took 21-40 min on 2 cores (experiments/voita-table-cpu), a beam-4 split ~1 min.
constexpr double kPriorPruneStepS = 1.5, kPriorTrainStepS = 1.2, kPriorEvalS = 60;

Step make_step(std::string id, std::string kind) {
  Step s;
  s.id = std::move(id);
  s.kind = std::move(kind);
  return s;
}

struct PlanBuilder {
  const ExperimentSpec& e;
  fs::path out;
  int threads;
  Plan plan;

  size_t add(Step s) {
    plan.steps.push_back(std::move(s));
    return plan.steps.size() - 1;
  }

  // `train CONFIGS --set ... --set train.max_steps=LEG ... --out DIR`, one step per leg.
  size_t train_legs(const std::string& id, const std::vector<std::string>& configs,
                    const Assignments& set, const std::vector<int64_t>& legs,
                    const std::vector<std::string>& extra, const fs::path& dir,
                    std::vector<size_t> deps) {
    int64_t before = 0;
    size_t last = 0;
    for (int64_t leg : legs) {
      Step s = make_step(fmt::format("{}/leg-{}", id, leg), "train");
      s.args.push_back("train");
      s.args.insert(s.args.end(), configs.begin(), configs.end());
      for (const auto& [k, v] : set) s.args.insert(s.args.end(), {"--set", k + "=" + v});
      s.args.insert(s.args.end(), {"--set", fmt::format("train.max_steps={}", leg)});
      detail::add_threads(s.args, set, {}, threads);
      s.args.insert(s.args.end(), extra.begin(), extra.end());
      s.args.insert(s.args.end(), {"--out", dir.string()});
      s.log = run::RunFolder{dir}.sweep_log();
      s.deps = deps;
      if (before == 0) s.fresh_dir = dir;  // the later legs go on in the first leg's folder
      s.train_steps = leg - before;
      before = leg;
      last = add(s);
      deps = {last};
    }
    return last;
  }

  // Beam evaluations of `checkpoint` on every split into DIR/PREFIXSPLIT.json (+ .hyp.txt).
  std::vector<size_t> evals(const std::string& id, const fs::path& checkpoint, const fs::path& dir,
                            const std::string& prefix, size_t dep) {
    std::vector<size_t> ids;
    for (const auto& split : e.splits) {
      Step s = make_step(fmt::format("{}/{}{}", id, prefix, split), "eval");
      s.args = {"eval",
                "--checkpoint",
                checkpoint.string(),
                "--split",
                split,
                "--beam",
                fmt::format("{}", e.beam),
                "--out",
                (dir / (prefix + split + ".json")).string(),
                "--hyp-out",
                (dir / (prefix + split + ".hyp.txt")).string()};
      s.log = dir / (prefix + split + ".log");
      s.deps = {dep};
      s.splits = 1;
      ids.push_back(add(s));
    }
    return ids;
  }
};

// OUT/baseline is a run folder either way: trained in legs, or the committed checkpoint copied to
// its checkpoints/best (its evaluations then sit beside it, as a trained run's do).
size_t baseline_steps(PlanBuilder& b) {
  const fs::path dir = b.out / "baseline";
  b.plan.baseline = run::RunFolder{dir}.best();
  if (!b.e.baseline_from.empty()) {
    Step copy = make_step("baseline/copy", "copy");
    copy.args = {b.e.baseline_from.string()};
    copy.log = b.out / "baseline.log";
    return b.add(copy);
  }
  return b.train_legs("baseline", b.e.baseline_configs, b.e.baseline_set, b.e.baseline_legs, {},
                      dir, {});
}

// One seed's runs: pruning, evaluations, Michel et al.'s comparison, retraining, its report.
void seed_steps(PlanBuilder& b, int seed, size_t baseline, const std::vector<size_t>& base_evals) {
  const fs::path sdir = b.out / fmt::format("seed-{}", seed);
  const SweepSpec spec = seed_sweep(b.e, b.out, seed);
  std::vector<size_t> all = base_evals;
  const std::string sid = fmt::format("seed-{}", seed);
  for (size_t i = 0; i < spec.points.size(); ++i) {
    const auto& p = spec.points[i];
    const Job job = point_job(spec, i, sdir, b.threads);
    Step s = make_step(fmt::format("{}/{}/prune", sid, p.name), "prune");
    s.args = job.args;
    s.log = run::RunFolder{job.dir}.sweep_log();
    s.deps = {baseline};
    s.fresh_dir = job.dir;
    s.train_steps = resolve_point(spec, p).train.max_steps;
    const size_t pr = b.add(s);
    all.push_back(pr);
    const fs::path run = job.dir;
    for (size_t id : b.evals(sid + "/" + p.name, run::RunFolder{run}.pruned(), run, "eval-", pr))
      all.push_back(id);
    if (p.name.rfind("target-", 0) == 0) {
      Step c = make_step(fmt::format("{}/{}/compare", sid, p.name), "compare");
      c.args = {"analyze",
                "compare",
                "--checkpoint",
                b.plan.baseline.string(),
                "--run",
                run.string(),
                "--split",
                b.e.splits.front(),
                "--sentences",
                std::to_string(b.e.compare_sentences),
                "--beam",
                std::to_string(b.e.beam),
                "--finetune",
                "--out",
                (run / "compare-ft").string()};
      detail::add_threads(c.args, b.e.prune_set, b.e.target_set, b.threads);
      c.log = run / "compare-ft.log";
      c.deps = {pr};
      c.fresh_dir = run / "compare-ft";
      c.train_steps = analysis::finetune_budget(resolve_point(spec, p));
      c.splits = 2;  // the masked evaluations of the analysis, about two splits' worth
      const size_t cid = b.add(c);
      all.push_back(cid);
      const fs::path ft = run / "compare-ft";
      for (size_t id :
           b.evals(sid + "/" + p.name + "/michel", ft / "michel-finetuned" / "checkpoints" / "last",
                   ft, "eval-michel-finetuned-", cid))
        all.push_back(id);
    }
    if (std::find(b.e.scratch_runs.begin(), b.e.scratch_runs.end(), p.name) ==
        b.e.scratch_runs.end())
      continue;
    Assignments set = b.e.scratch_set;
    set.emplace_back("seed", std::to_string(seed));
    const fs::path scratch = run / "scratch";
    const size_t last = b.train_legs(
        fmt::format("{}/{}/scratch", sid, p.name), b.e.scratch_configs, set, b.e.scratch_legs,
        {"--architecture-from", run::RunFolder{run}.pruned().string()}, scratch, {pr});
    all.push_back(last);
    for (size_t id : b.evals(sid + "/" + p.name + "/scratch", run::RunFolder{scratch}.best(),
                             scratch, "eval-", last))
      all.push_back(id);
  }
  // The report's primary split is the last listed: the experiment's first split.
  std::vector<std::string> splits(b.e.splits.rbegin(), b.e.splits.rend());
  Step r = make_step(sid + "/report", "report");
  r.args = {"report", sdir.string(), "--split", fmt::format("{}", fmt::join(splits, ","))};
  r.log = sdir / "report.log";
  r.deps = all;
  b.add(r);
}

}  // namespace

Plan make_plan(const ExperimentSpec& e, const fs::path& out, int threads_blas) {
  PlanBuilder b{e, out, threads_blas, {}};
  const size_t baseline = baseline_steps(b);
  const fs::path bdir = out / "baseline";
  const auto base_evals = b.evals("baseline", b.plan.baseline, bdir, "eval-", baseline);
  for (int seed = 1; seed <= e.seeds; ++seed) seed_steps(b, seed, baseline, base_evals);
  return b.plan;
}

namespace {

std::string timestamp() {
  return utc_clock(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
}

fs::path marker(const fs::path& out, const std::string& id) {
  std::string name = id;
  std::replace(name.begin(), name.end(), '/', '~');
  return out / "steps" / (name + ".json");
}

bool step_done(const fs::path& out, const Step& s) {
  std::error_code ec;
  return fs::exists(marker(out, s.id), ec);
}

// Which pieces are done: those with a marker, unless a piece they depend on is not (it runs again,
// so they do too, as make would have it: a seed's report after a run added to the experiment file,
// an evaluation after its run's marker was deleted). The plan lists every piece after its deps.
std::vector<bool> done_pieces(const Plan& plan, const fs::path& out) {
  std::vector<bool> done(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    done[i] = step_done(out, s) &&
              std::all_of(s.deps.begin(), s.deps.end(), [&](size_t d) { return d < i && done[d]; });
  }
  return done;
}

// OUT/stale/20261129T031500Z: where one invocation sets aside what its pieces redo (with "-2",
// "-3", ... where an earlier invocation of the same second has that folder).
std::string stale_stamp(const fs::path& out) {
  std::string t = timestamp();  // "2026-11-29 03:15:00"
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == '-' || c == ':'; }), t.end());
  std::replace(t.begin(), t.end(), ' ', 'T');
  t += "Z";
  std::error_code ec;
  std::string stamp = t;
  for (int k = 2; fs::exists(out / "stale" / stamp, ec); ++k) stamp = fmt::format("{}-{}", t, k);
  return stamp;
}

// A done piece that runs again because a piece it depends on is not done: its marker and its run
// folder (with what lies in it: evaluations, a from-scratch run) move to OUT/stale/STAMP/, so it
// starts afresh. Nothing is deleted; an interruption after this resumes the fresh run.
void set_aside(const fs::path& out, const Step& s, const std::string& stamp) {
  const fs::path stale = out / "stale" / stamp;
  const auto move = [&](const fs::path& from) {
    const fs::path rel = from.lexically_relative(out);
    const fs::path to = stale / (rel.empty() || *rel.begin() == ".." ? from.filename() : rel);
    fs::create_directories(to.parent_path());
    fs::rename(from, to);
    return to;
  };
  std::error_code ec;
  const bool has_dir = !s.fresh_dir.empty() && fs::exists(s.fresh_dir, ec);
  move(marker(out, s.id));
  if (has_dir)
    log::info(
        "reproduce: {} runs again afresh: a piece it depends on is not done; its run {} is "
        "now {}",
        s.id, s.fresh_dir.string(), move(s.fresh_dir).string());
  else
    log::info("reproduce: {} runs again: a piece it depends on is not done", s.id);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Rates from the markers of finished pieces (seconds per training step, per evaluated split);
// `fallback` where there are none.
Rates measured_rates(const fs::path& out, const Rates& fallback) {
  std::map<std::string, std::vector<double>> per;
  for (const json& j : step_markers(out)) {
    const std::string kind = j.value("kind", "");
    const double sec = j.value("seconds", 0.0);
    const auto steps = j.value("train_steps", int64_t{0});
    const auto splits = j.value("splits", int64_t{0});
    if ((kind == "prune" || kind == "train") && steps > 0) per[kind].push_back(sec / steps);
    if (kind == "eval" && splits > 0) per[kind].push_back(sec / static_cast<double>(splits));
  }
  Rates r = fallback;
  if (!per["prune"].empty()) r.prune_step_s = median(per["prune"]);
  if (!per["train"].empty())
    r.train_step_s = median(per["train"]);
  else if (!per["prune"].empty())
    r.train_step_s = r.prune_step_s * fallback.train_step_s / fallback.prune_step_s;
  if (!per["eval"].empty()) r.eval_split_s = median(per["eval"]);
  if (!per["prune"].empty() || !per["train"].empty() || !per["eval"].empty())
    r.source = Rates::Source::kMeasured;
  return r;
}

const Rates kPriorRates{kPriorPruneStepS, kPriorTrainStepS, kPriorEvalS, Rates::Source::kPrior};

std::string rates_source(const Rates& r) {
  switch (r.source) {
    case Rates::Source::kMeasured:
      return "rates measured on this machine";
    case Rates::Source::kCalibrated:
      return "rates calibrated on this machine before the first piece";
    default:
      return "prior rates of a 2-core CPU, not measured here";
  }
}

}  // namespace

Rates calibrate_rates(const ExperimentSpec& e, int steps) {
  HC_CHECK(steps >= 1, "--calibrate must be at least 1 step (0: no calibration)");
  const SweepSpec s = seed_sweep(e, "OUT", 1);
  HC_CHECK(!s.points.empty(), "{}: no pruning run to calibrate with", e.file.string());
  const Config c = resolve_point(s, s.points.front());
  bench::TrainBenchOptions o;
  o.d_model = static_cast<int>(c.model.d_model);
  o.layers = static_cast<int>(std::max(c.model.encoder_layers, c.model.decoder_layers));
  o.heads = static_cast<int>(c.model.heads);
  o.ffn = static_cast<int>(c.model.ffn_dim);
  o.vocab = static_cast<int>(c.vocab.size);
  o.length = 32;  // a batch of train.max_tokens target tokens, as the runs take
  o.sentences = std::max(1, static_cast<int>(c.train.max_tokens / o.length));
  o.steps = steps;
  o.warmup = 1;
  o.gated = true;
  log::info(
      "reproduce: calibrating: {} plain and {} gated training steps of the model (d {}, {} "
      "layers, {} heads, {} target tokens a step)",
      steps, steps, o.d_model, o.layers, o.heads, o.sentences * o.length);
  const auto r = bench::bench_train(o, c);
  Rates out;
  out.train_step_s = r.median();
  out.prune_step_s = r.gated_median();
  out.eval_split_s = kPriorEvalS * out.train_step_s / kPriorTrainStepS;
  out.source = Rates::Source::kCalibrated;
  return out;
}

double estimate_seconds(const Step& s, const Rates& r) {
  if (s.kind == "prune") return static_cast<double>(s.train_steps) * r.prune_step_s;
  if (s.kind == "train") return static_cast<double>(s.train_steps) * r.train_step_s;
  if (s.kind == "compare")
    return static_cast<double>(s.train_steps) * r.train_step_s +
           static_cast<double>(s.splits) * r.eval_split_s;
  if (s.kind == "eval") return static_cast<double>(s.splits) * r.eval_split_s;
  return 5;
}

std::string plan_table(const Plan& plan, const fs::path& out, const Rates& rates) {
  std::string t = fmt::format("{:<44} {:<8} {:>7} {:>10}\n", "piece", "kind", "state", "estimate");
  double left = 0, total = 0;
  size_t done = 0, again = 0;
  const auto done_before = done_pieces(plan, out);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const bool d = done_before[i];
    // "again": done before, but a piece it depends on is not (it runs afresh, set_aside).
    const bool a = !d && step_done(out, s);
    const double est = estimate_seconds(s, rates);
    total += est;
    if (d)
      ++done;
    else
      left += est, again += a;
    t += fmt::format("{:<44} {:<8} {:>7} {:>10}\n", s.id, s.kind,
                     d ? "done" : (a ? "again" : "pending"), d ? "-" : log::duration(est));
  }
  t += fmt::format(
      "{} pieces, {} done{}; estimated {} left of {} in all, one piece at a time ({}: {:.3g} s a "
      "pruning step, {:.3g} s a training step, {:.3g} s a split's evaluation)\n",
      plan.steps.size(), done,
      again ? fmt::format(", {} to run again (a piece they depend on is not done)", again) : "",
      log::duration(left), log::duration(total), rates_source(rates), rates.prune_step_s,
      rates.train_step_s, rates.eval_split_s);
  return t;
}

namespace {

// A piece's arguments without the thread settings (which a resume with other --workers changes).
std::vector<std::string> without_threads(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--set" && i + 1 < args.size() && args[i + 1].rfind("threads.", 0) == 0) {
      ++i;
      continue;
    }
    out.push_back(args[i]);
  }
  return out;
}

// Pieces done under other settings (the experiment file changed since) would be reported as runs
// of settings they did not have: an error naming the first, before anything runs.
void check_done_pieces_match(const Plan& plan, const fs::path& out) {
  for (const auto& s : plan.steps) {
    if (!step_done(out, s)) continue;
    json j;
    try {
      j = json::parse(io::read_file(marker(out, s.id)));
    } catch (const std::exception& e) {
      HC_FAIL("{}: not JSON ({}); delete it to run {} again", marker(out, s.id).string(), e.what(),
              s.id);
    }
    if (!j.contains("args")) continue;
    const auto before = without_threads(j["args"].get<std::vector<std::string>>());
    HC_CHECK(before == without_threads(s.args),
             "{} holds pieces of another experiment: {} ran as `headcount {}`, the experiment "
             "file now asks for `headcount {}`. Use another --out, or the file they came from",
             out.string(), s.id, fmt::join(before, " "), fmt::join(without_threads(s.args), " "));
  }
}

// The committed baseline's checkpoint files (not its evaluations) copied into
// OUT/baseline/checkpoints/best, with a summary.json saying where they came from.
void copy_baseline(const fs::path& from, const fs::path& run_dir) {
  const run::RunFolder run{run_dir};
  const fs::path to = run.best();
  const fs::path tmp = to.string() + ".partial";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  for (const auto& f : fs::directory_iterator(from)) {
    const std::string name = f.path().filename().string();
    if (name.rfind("eval-", 0) == 0 || name.find(".xzp") != std::string::npos) continue;
    fs::copy(f.path(), tmp / name, fs::copy_options::recursive);
  }
  fs::remove_all(to, ec);
  fs::rename(tmp, to);
  run::RunSummary summary;
  summary.status = "finished";
  summary.command = "copy of " + from.string();
  run::write_summary(run, summary);
}

void write_marker(const fs::path& out, const Step& s, double seconds) {
  const json j = {{"id", s.id},
                  {"kind", s.kind},
                  {"exit_code", 0},
                  {"seconds", seconds},
                  {"train_steps", s.train_steps},
                  {"splits", s.splits},
                  {"args", s.args},
                  {"finished_at", timestamp()},
                  {"provenance", provenance::record()}};
  fs::create_directories(out / "steps");
  io::write_file_atomic(marker(out, s.id), j.dump(2) + "\n");
}

// A piece's state while the plan runs (kBlocked: a piece it needs failed).
enum class Piece { kPending, kRunning, kDone, kFailed, kBlocked, kStopped };

struct Runner {
  const Plan& plan;
  const ReproduceOptions& o;
  std::vector<Piece> state;
  std::map<pid_t, std::pair<size_t, std::chrono::steady_clock::time_point>> running;
  ReproduceOutcome outcome;
  Rates fallback;  // the plan's rates: what measured_rates keeps where no piece measured a kind
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int forwarded = 0;

  bool ready(size_t i) const {
    if (state[i] != Piece::kPending) return false;
    return std::all_of(plan.steps[i].deps.begin(), plan.steps[i].deps.end(),
                       [&](size_t d) { return state[d] == Piece::kDone; });
  }
  void block_dependents() {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < state.size(); ++i)
        if (state[i] == Piece::kPending)
          for (size_t d : plan.steps[i].deps)
            if (state[d] == Piece::kFailed || state[d] == Piece::kBlocked) {
              state[i] = Piece::kBlocked;
              changed = true;
              break;
            }
    }
  }
  void progress() const {
    size_t done = 0, pending = 0;
    double left = 0;
    const Rates r = measured_rates(o.out, fallback);
    for (size_t i = 0; i < state.size(); ++i) {
      if (state[i] == Piece::kDone) ++done;
      if (state[i] == Piece::kPending || state[i] == Piece::kRunning)
        ++pending, left += estimate_seconds(plan.steps[i], r);
    }
    const double el =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log::info(
        "reproduce: {}/{} pieces done, {} to go, {} running; elapsed {}, ETA {} ({} at a "
        "time)",
        done, state.size(), pending, running.size(), log::duration(el),
        log::duration(left / std::max(1, o.workers)), o.workers);
  }
};

void start_step(Runner& r, size_t i) {
  const Step& s = r.plan.steps[i];
  log::info("reproduce: starting {} (log: {})", s.id, s.log.string());
  if (s.kind == "copy") {
    const auto t0 = std::chrono::steady_clock::now();
    copy_baseline(s.args.at(0), r.o.out / "baseline");
    write_marker(r.o.out, s,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    r.state[i] = Piece::kDone;
    ++r.outcome.done;
    return;
  }
  fs::create_directories(s.log.parent_path());
  io::append_line(s.log,
                  fmt::format("=== headcount reproduce: {} started {} UTC ===", s.id, timestamp()));
  process::ChildOptions c;
  c.argv = {r.o.executable.string()};
  c.argv.insert(c.argv.end(), s.args.begin(), s.args.end());
  c.output_file = s.log;
  c.stdin_null = true;
  c.die_with_parent = true;
  const pid_t pid = process::start(c).pid;
  r.state[i] = Piece::kRunning;
  r.running[pid] = {i, std::chrono::steady_clock::now()};
}

void end_step(Runner& r, pid_t pid, int status) {
  const auto it = r.running.find(pid);
  if (it == r.running.end()) return;
  const size_t i = it->second.first;
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.second).count();
  r.running.erase(it);
  const Step& s = r.plan.steps[i];
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0) {
    write_marker(r.o.out, s, sec);
    r.state[i] = Piece::kDone;
    ++r.outcome.done;
    log::info("reproduce: {} finished in {}", s.id, log::duration(sec));
  } else if (StopSignals::count() || code == kExitInterrupted) {
    r.state[i] = Piece::kStopped;
    ++r.outcome.interrupted;
    log::info("reproduce: {} stopped; it resumes next time", s.id);
  } else {
    r.state[i] = Piece::kFailed;
    ++r.outcome.failed;
    r.outcome.failed_ids.push_back(s.id);
    log::warn("reproduce: {} FAILED (exit {}); see {}", s.id, code, s.log.string());
    r.block_dependents();
  }
  r.progress();
}

void run_plan(Runner& r) {
  while (true) {
    if (!StopSignals::count())
      for (size_t i = 0; i < r.state.size() && r.running.size() < static_cast<size_t>(r.o.workers);
           ++i)
        if (r.ready(i)) start_step(r, i);
    if (r.running.empty()) {
      // A copy finishing in-process can make more pieces ready.
      bool any_ready = false;
      for (size_t i = 0; i < r.state.size(); ++i) any_ready |= r.ready(i);
      if (!any_ready || StopSignals::count()) break;
      continue;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno != EINTR) break;
      if (StopSignals::count() > r.forwarded) {
        log::info(
            "reproduce: stopping: the running pieces save a checkpoint and stop; run the "
            "same command to resume");
        for (const auto& [p, x] : r.running) kill(-p, SIGTERM);
        r.forwarded = StopSignals::count();
      }
      continue;
    }
    end_step(r, pid, status);
  }
}

}  // namespace

ReproduceOutcome run_reproduce(const ExperimentSpec& e, const ReproduceOptions& o) {
  HC_CHECK(o.workers >= 1, "--workers must be at least 1");
  const int cores = o.cores > 0 ? o.cores : runtime::num_cores();
  const Plan plan = make_plan(e, o.out, std::max(1, cores / o.workers));
  check_done_pieces_match(plan, o.out);
  Rates rates = measured_rates(o.out, kPriorRates);
  if (rates.source == Rates::Source::kPrior && o.calibrate_steps > 0)
    rates = calibrate_rates(e, o.calibrate_steps);
  std::printf("%s", plan_table(plan, o.out, rates).c_str());
  std::fflush(stdout);
  if (o.dry_run) {  // the commands, nothing written
    for (const auto& s : plan.steps) {
      const std::string what =
          s.kind == "copy" ? fmt::format("copy {} to {}", s.args.at(0), plan.baseline.string())
                           : fmt::format("headcount {}", fmt::join(s.args, " "));
      std::printf("%s: %s\n", s.id.c_str(), what.c_str());
    }
    return {};
  }
  fs::create_directories(o.out);
  io::RunLock lock = io::RunLock::acquire(o.out);
  lock.keep_file();
  for (size_t s = 1; s <= static_cast<size_t>(e.seeds); ++s) {
    const fs::path sdir = o.out / fmt::format("seed-{}", s);
    fs::create_directories(sdir);
    io::write_file_atomic(sdir / "sweep.json",
                          sweep_manifest(seed_sweep(e, o.out, static_cast<int>(s))).dump(2) + "\n");
  }
  Runner r{plan, o, std::vector<Piece>(plan.steps.size(), Piece::kPending), {}, {}, rates};
  const auto done_before = done_pieces(plan, o.out);
  const std::string stamp = stale_stamp(o.out);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (done_before[i])
      r.state[i] = Piece::kDone, ++r.outcome.skipped;
    else if (step_done(o.out, plan.steps[i]))
      set_aside(o.out, plan.steps[i], stamp);
  }
  const StopSignals stop_signals(StopSignals::Options{.restart = false, .exit_on = 0});
  run_plan(r);
  if (r.outcome.failed == 0 && r.outcome.interrupted == 0 &&
      std::all_of(r.state.begin(), r.state.end(), [](Piece s) { return s == Piece::kDone; })) {
    const std::string where = write_seed_report(e, o.out);
    log::info("reproduce: every piece is done; the table: {}", where);
  }
  return r.outcome;
}

}  // namespace headcount::sweep
