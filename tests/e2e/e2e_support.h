// Helpers of the end-to-end tests, which start the real binaries: run
// smallemctl to completion, and pick a free loopback port for a coordinator
// process.
#ifndef SMALLEM_TESTS_E2E_E2E_SUPPORT_H_
#define SMALLEM_TESTS_E2E_E2E_SUPPORT_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/worker/worker_test_support.h"
#include "worker/child_process.h"

namespace smallem::testing {

struct CtlOutput {
  ChildExit exit;
  std::string out;  // stdout, lines joined with '\n'
  std::string last_error;
};

// Runs smallemctl with `args` until it exits.
inline CtlOutput RunCtl(const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> ctl = ChildProcess::Spawn(CtlBinary(), args);
  EXPECT_TRUE(ctl.ok()) << ctl.status();
  if (!ctl.ok()) return CtlOutput{};
  std::vector<std::string> lines;
  while ((*ctl)->Poll(100, &lines)) {
  }
  CtlOutput o;
  o.exit = (*ctl)->Wait();
  o.out = absl::StrJoin(lines, "\n");
  o.last_error = (*ctl)->last_stderr_line();
  return o;
}

// A port free right now on 127.0.0.1, for a coordinator process that must be
// reached (or come back) on a known address.
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_E2E_E2E_SUPPORT_H_
