// `smallemctl export EXP --tensorboard DIR --csv FILE`: an experiment's
// curves for other tools, read from the coordinator.
//
//  --tensorboard DIR  one run directory per variant and seed
//                     (DIR/<variant>/seed<N>; DIR/<variant>_<budget>/seed<N>
//                     when a variant has several budgets, as the reference
//                     curve does) holding one event file (cli/tfevents.h):
//                     train/loss (nats/token), train/tokens_per_s, train/lr
//                     (the schedule's rate at that point) per progress point,
//                     val/nats_per_byte at the run's last step, and the run
//                     spec as text (run_spec).
//  --csv FILE         one row per metric point (docs/dashboard.md § Export
//                     lists the columns), plus one "val" row per finished run.
#ifndef SMALLEM_CLI_EXPORT_COMMAND_H_
#define SMALLEM_CLI_EXPORT_COMMAND_H_

#include <string>

#include "cli/service_commands.h"

namespace smallem::cli {

struct ExportArgs {
  ServiceArgs service;
  std::string experiment;   // name or id
  std::string tensorboard;  // directory; "" = none
  std::string csv;          // file; "" = none
};

// Returns the exit code (base/exit_codes.h): 2 when neither output is given
// or the experiment is unknown.
int RunExport(const ExportArgs& args);

}  // namespace smallem::cli

#endif  // SMALLEM_CLI_EXPORT_COMMAND_H_
