// Checks of request fields both services share, before any handler touches
// the store: InvalidArgument with a message naming the field, never the
// field's whole (possibly huge) value.
#ifndef SMALLEM_SERVER_SERVICE_REQUEST_CHECKS_H_
#define SMALLEM_SERVER_SERVICE_REQUEST_CHECKS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace smallem {

// A dataset content hash: 64 lowercase hex digits (a SHA-256, meta.json's
// content_hash). `field` names the request field in the message.
absl::Status CheckContentHash(absl::string_view hash, absl::string_view field = "content_hash");

}  // namespace smallem

#endif  // SMALLEM_SERVER_SERVICE_REQUEST_CHECKS_H_
