// Grid: one experiment as a researcher writes it in a YAML grid file
// (docs/grid-format.md) — a base run spec, named variants and/or grid axes,
// seeds, a budget, the baseline's name and an optional reference curve —
// expanded into the runs (cells) the coordinator queues.
//
// Identity. Each variant's run spec is canonical JSON (RunSpec::ToJson with
// the keys "data", "seed", "steps" and "minutes" removed: the dataset is the
// experiment's, the seed and budget are the cell's), and its spec hash is the
// SHA-256 hex of that JSON. A cell is identified by (spec_hash, seed,
// BudgetKey(budget)): resubmitting a grid yields the same keys, so finished
// cells are never run twice. All seeds of a variant share one spec hash.
//
// ParseGrid is a pure function of its arguments (no file system access); a
// Grid is a plain value, safe to read from several threads.
#ifndef SMALLEM_RUNSPEC_GRID_H_
#define SMALLEM_RUNSPEC_GRID_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runspec/run_spec.h"

namespace smallem {

// One named variant after expansion: base ← its overrides.
struct GridVariant {
  std::string name;       // as written, or "lr=0.001,norm=rms" for an axis combination
  std::string spec_json;  // canonical, without data/seed/steps/minutes
  std::string spec_hash;  // lower-case SHA-256 hex of spec_json
  int line = 0;           // line of the grid file that defines it (for messages)
};

// The equal-time reference curve: complete runs of the baseline's spec (with
// the reference block's overrides, typically `optimizer: adamw`) at several
// budgets, each decaying its learning rate to its own end.
struct ReferenceCurve {
  std::string spec_json;        // canonical, as for GridVariant
  std::string spec_hash;
  std::vector<Budget> budgets;  // strictly increasing; all steps or all minutes
  std::vector<int64_t> seeds;   // defaults to the grid's seeds
};

// Sequential seeds (docs/grid-format.md § Sequential seeds), from
// `seeds: {start: [1, 2, 3], max: 10, looks: [3, 5, 10]}`: every arm starts
// with the `start` seeds; at each look the coordinator decides each variant
// (server/analysis/sequential.h) and gives the undecided ones, and the
// baseline while any comparison with it is open, seeds up to the next look.
// Seeds beyond `start` are max(start) + 1, max(start) + 2, …, so an arm's
// first n seeds are the same on every submission.
struct SeedSchedule {
  std::vector<int64_t> start;  // distinct, non-negative, in file order
  int max = 0;                 // cap on seeds per arm: ≥ start.size()
  // Seeds per arm at each look: strictly increasing, looks[0] ==
  // start.size() ≥ 2, looks.back() ≤ max.
  std::vector<int> looks;

  // The first `n` seeds of an arm (start, then the seeds after it).
  // REQUIRES: start.size() ≤ n ≤ max.
  std::vector<int64_t> SeedsUpTo(int n) const;
  // {"start":[…],"max":N,"looks":[…]}: what the store keeps with the
  // experiment; FromJson reads it back (InvalidArgument when malformed).
  std::string ToJson() const;
  static absl::StatusOr<SeedSchedule> FromJson(std::string_view text);
};

enum class CellKind { kVariant, kReference };

// One run to execute: a spec at a seed and a budget.
struct Cell {
  CellKind kind = CellKind::kVariant;
  std::string variant;  // the variant's name; "reference" for reference cells
  std::string spec_json;
  std::string spec_hash;
  int64_t seed = 0;
  Budget budget;
};

// "steps:300" or "minutes:2.5": the budget's part of a cell's identity.
std::string BudgetKey(const Budget& budget);
// "300 steps" or "2.5 min": for people.
std::string BudgetLabel(const Budget& budget);

struct Grid {
  std::string file_name;  // as given to ParseGrid; prefixes error messages
  std::string name;       // experiment name: [A-Za-z0-9._-]+
  // The prepared dataset directory exactly as the file writes it: what a
  // client and the coordinator both know it by (e.g. as the key of
  // SubmitRequest.dataset_hashes).
  std::string data;
  // `data` resolved lexically against the grid file's directory unless
  // absolute: where the machine that read the file finds the dataset.
  std::string data_dir;
  std::string baseline;       // names one of `variants`
  std::vector<int64_t> seeds; // distinct, non-negative, in file order
  // Set for sequential seeds; then `seeds` is its `start`, the seeds that
  // Cells() queues at submission.
  std::optional<SeedSchedule> sequential;
  Budget budget;              // exactly one of steps / minutes
  // Named variants in file order, then axis combinations (first axis varies
  // slowest). Names and spec hashes are unique.
  std::vector<GridVariant> variants;
  std::optional<ReferenceCurve> reference;
  // `holm: true`: better/worse verdicts use Holm's correction across the
  // variants (docs/grid-format.md); off by default.
  bool holm = false;

  // nullptr when no variant has this name.
  const GridVariant* FindVariant(std::string_view name) const;

  // Every run of the experiment, in the order to queue them: for each seed,
  // every variant at the grid's budget; then the reference curve, for each
  // budget, each reference seed. No two cells share (spec_hash, seed,
  // BudgetKey): a reference cell identical to a variant cell (a reference
  // curve through the baseline's own budget) is listed once, as the
  // variant's.
  std::vector<Cell> Cells() const;

  // How many runs the experiment may queue at most (seeds × variants, or
  // max × variants for sequential seeds, plus the reference curve's
  // budgets × seeds), computed without expanding them.
  int64_t RunCountBound() const;

  // The complete run spec for `cell`: the cell's spec plus data_dir, seed
  // and budget (a worker that caches datasets elsewhere replaces `data`).
  // `cell` must come from this grid's Cells() (CHECKed: ParseGrid validated
  // its spec).
  RunSpec RunSpecFor(const Cell& cell) const;
};

// Parses and validates a grid file. `file_name` is used for messages
// ("grid.yaml:14: ...") and to resolve a relative `data` directory.
// InvalidArgument on any problem, with the file, line and key: YAML syntax,
// unknown key (with the nearest valid key), wrong type, an empty grid, a
// duplicate variant name or run spec, a missing baseline or one that is not a
// variant, bad seeds (or a sequential schedule whose looks do not increase
// from len(start) to at most max), a budget with both or neither of steps/minutes, and any
// run spec the engine rejects (RunSpec::FromJson).
absl::StatusOr<Grid> ParseGrid(std::string_view yaml_text, std::string_view file_name);

}  // namespace smallem

#endif  // SMALLEM_RUNSPEC_GRID_H_
