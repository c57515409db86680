// Products interrupted by handled signals. oneDNN's no-copy sgemm kernels
// run with the stack pointer moved onto a heap workspace (k over 84); a
// handler that ran there wrote its frame into the heap, which is how a
// SIGTERM'd 2-thread training child aborted with "corrupted size vs.
// prev_size" (docs/reliability.md). Without the signal mask in
// engine/cpu/matmul.cc this test aborts the same way within a fraction of a
// second.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/cpu/gemm.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

std::atomic<int64_t> g_handled{0};
void CountSignal(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

TEST(GemmSignalTest, HandledSignalsDuringProductsLeaveTheHeapIntact) {
  struct sigaction count = {}, previous = {};
  count.sa_handler = CountSignal;
  ASSERT_EQ(sigaction(SIGUSR1, &count, &previous), 0);
  g_handled = 0;

  // Another thread signals this one every 20 µs while it multiplies.
  std::atomic<bool> done{false};
  const pthread_t target = pthread_self();
  std::thread sender([&] {
    while (!done.load()) {
      pthread_kill(target, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });

  constexpr int64_t m = 64, n = 32, k = 512;  // the no-copy path, k > 84
  const std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f);
  std::vector<float> c(m * n);
  for (cpu::GemmLibrary library : cpu::GemmLibrariesInUse(TestCpuOptions().gemm)) {
    for (int call = 0; call < 8000; ++call) {
      // Heap traffic around the products, so that a corrupted chunk is
      // found by malloc or free, as it was in training.
      std::vector<char> churn(64 + call % 4096);
      const bool trans_a = call % 2 == 1, trans_b = call % 4 >= 2;
      cpu::GemmOn(library, trans_a, trans_b, m, n, k, 1.0f, a.data(), trans_a ? m : k,
                  b.data(), trans_b ? k : n, 0.0f, c.data(), n);
    }
    EXPECT_EQ(c[0], 0.5f * 0.25f * k) << cpu::GemmLibraryName(library);
    EXPECT_EQ(c[m * n - 1], 0.5f * 0.25f * k) << cpu::GemmLibraryName(library);
  }
  done = true;
  sender.join();
  sigaction(SIGUSR1, &previous, nullptr);
  // The signals did land: the products ran between handlers, not without them.
  EXPECT_GT(g_handled.load(), 100);
}

}  // namespace
}  // namespace smallem
