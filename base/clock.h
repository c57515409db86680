// Clock: the coordinator's only source of time, injected so tests can move
// time forward (lease expiry) without sleeping. Times are Unix epoch
// milliseconds.
#ifndef SMALLEM_BASE_CLOCK_H_
#define SMALLEM_BASE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace smallem {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch. Thread-safe.
  virtual int64_t NowUnixMs() const = 0;
};

// The wall clock. Thread-safe; a process-wide instance.
class SystemClock final : public Clock {
 public:
  static SystemClock* Get() {
    static SystemClock clock;
    return &clock;
  }
  int64_t NowUnixMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_unix_ms = 1'700'000'000'000) : now_(start_unix_ms) {}
  int64_t NowUnixMs() const override { return now_.load(); }
  void AdvanceMs(int64_t ms) { now_.fetch_add(ms); }
  void SetUnixMs(int64_t ms) { now_.store(ms); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace smallem

#endif  // SMALLEM_BASE_CLOCK_H_
