// The keys a run spec's JSON may hold (RunSpec::FromJson refuses any
// other), for the places that check a file's keys before its values:
// `smallemctl train --spec FILE` names the line of a key it does not know.
#ifndef SMALLEM_RUNSPEC_RUN_SPEC_KEYS_H_
#define SMALLEM_RUNSPEC_RUN_SPEC_KEYS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace smallem {

// Every key, in the order of docs/reference.md's run-spec table.
const std::vector<std::string>& RunSpecKeyNames();

// InvalidArgument for the key `key`, which is not one of RunSpecKeyNames():
// `unknown key "lrr" (did you mean "lr"?)`, or the list when no key is near.
absl::Status UnknownRunSpecKey(std::string_view key);

}  // namespace smallem

#endif  // SMALLEM_RUNSPEC_RUN_SPEC_KEYS_H_
