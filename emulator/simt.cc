// The SIMT core of the emulated device: one block at a time, each CUDA
// thread a fiber (its own stack, switched to by SwitchStacks below) on the
// launching thread. A fiber runs until it
// reaches a synchronization point (__syncthreads, __syncwarp, a warp
// shuffle or vote) or ends; the scheduler then resumes another ready fiber,
// in index order or, with a schedule seed, in a random order (and the
// blocks of the grid in a random order too), so that code whose result
// depends on the order of threads between two barriers gives different
// bits under two schedules.
//
// Checks (each a fault naming kernel, block and thread): a __syncthreads
// that not every thread of the block reaches, or that threads reach at
// different places (synccheck); a warp operation whose mask leaves out the
// calling lane, that the lanes of its mask reach with different masks or
// at different places, or that reads a lane outside the mask; __trap.
#include <sys/mman.h>

#if !defined(__x86_64__)
#error "the emulator switches fibers with x86-64 code (SwitchStacks)"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emulator/device.h"
#include "emulator/launch.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SMALLEM_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SMALLEM_EMU_ASAN 1
#endif
#if SMALLEM_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
// Racecheck (emulator/CMakeLists.txt, smallem_racecheck_test): the kernels
// are built under ThreadSanitizer, this file is not, and it tells
// ThreadSanitizer what the device orders. Each CUDA thread is a fiber of
// its own; switching between them orders nothing; a block's threads start
// after the host's work before the block and end before the host's work
// after it; a __syncthreads orders everything each thread did before it
// before everything any thread does after it, and a warp operation the
// same among its lanes. Two threads' accesses to one address with no such
// order between them, one a write, are then a race ThreadSanitizer reports
// with both accesses' stacks and the two threads' names.
#if SMALLEM_EMU_RACECHECK
#include <sanitizer/tsan_interface.h>
#endif

namespace smallem::emu {
namespace {

constexpr int kWarp = 32;
constexpr size_t kStackBytes = 256 * 1024;

// Saves the callee-saved registers and the stack pointer in *from and
// resumes the stack `to`: a fiber switch without a system call (ucontext's
// swapcontext saves the signal mask with one, and AddressSanitizer's
// interceptor clears the shadow of the whole target stack each time — the
// two made up two thirds of the emulated suite's time). x86-64 System V.
extern "C" void SmallemEmuSwitchStacks(void** from, void* to);
asm(R"(
  .text
  .globl SmallemEmuSwitchStacks
  .type SmallemEmuSwitchStacks, @function
SmallemEmuSwitchStacks:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size SmallemEmuSwitchStacks, .-SmallemEmuSwitchStacks
)");
inline void SwitchStacks(void** from, void* to) { SmallemEmuSwitchStacks(from, to); }

enum class State { kReady, kWaiting, kDone };

struct Fiber {
  uint3 idx{};
  int linear = 0;
  State state = State::kDone;
  bool started = false;  // has run since StartFiber
  void* sp = nullptr;  // its saved stack pointer while it does not run
  char* stack = nullptr;
  // The synchronization point it waits at.
  const char* file = nullptr;
  int line = 0;
  uint64_t deposit = 0, result = 0;
  int arg = 0;
  void* race_context = nullptr;  // its ThreadSanitizer fiber (racecheck)
};

struct Warp {
  unsigned arrived = 0;  // lanes waiting at the current warp operation
  unsigned mask = 0;
  int kind = -1;
  int generation = 0;    // warp operations completed (racecheck)
  char order[2] = {};    // racecheck: what a warp operation orders, by generation parity
};

// One block's execution state.
struct Block {
  const LaunchSpec* spec = nullptr;
  const std::function<void()>* body = nullptr;
  uint3 idx{};
  int threads = 0;
  int barrier_arrived = 0;
  int barrier_generation = 0;  // barriers completed (racecheck)
  char barrier_order[2] = {};  // racecheck: what a barrier orders, by generation parity
  std::vector<Warp> warps;
  std::vector<unsigned char> shared;
  std::string fault;
};

// One device, driven by one host thread at a time (as the runtime's queue,
// emulator/streams.cc): plain statics, not thread_local, which cost a TLS
// lookup on every builtin and every switch.
Block* current_block = nullptr;
Fiber* current_fiber = nullptr;
void* scheduler_sp = nullptr;
std::vector<Fiber> fibers;
#if SMALLEM_EMU_ASAN
const void* scheduler_stack_bottom = nullptr;
size_t scheduler_stack_size = 0;
#endif

// Racecheck's orders (no-ops in the ordinary build). A fiber releases at a
// barrier (or warp operation) as it arrives and acquires as it leaves, on
// the order object of that barrier's generation parity: a thread that left
// barrier g and reached g + 1 releases into the other object, so none of
// its later work is taken as ordered before a slower thread's leaving of g.
char block_start_order, block_end_order;
#if SMALLEM_EMU_RACECHECK
void* scheduler_race_context = nullptr;
void RaceRelease(void* order) { __tsan_release(order); }
void RaceAcquire(void* order) { __tsan_acquire(order); }
void RaceSwitchTo(void* context) {
  __tsan_switch_to_fiber(context, __tsan_switch_to_fiber_no_sync);
}
#else
void RaceRelease(void*) {}
void RaceAcquire(void*) {}
#endif

std::string ThreadName(const Block& b, const Fiber& f) {
  char text[160];
  std::snprintf(text, sizeof text, "block (%u,%u,%u) thread (%u,%u,%u)", b.idx.x, b.idx.y,
                b.idx.z, f.idx.x, f.idx.y, f.idx.z);
  return text;
}

void SwitchToScheduler() {
#if SMALLEM_EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, scheduler_stack_bottom, scheduler_stack_size);
#endif
#if SMALLEM_EMU_RACECHECK
  RaceSwitchTo(scheduler_race_context);
#endif
  SwitchStacks(&current_fiber->sp, scheduler_sp);
#if SMALLEM_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

// Thrown through a fiber's kernel frames to end it: a fault, or the end of a
// block another thread faulted in. Caught in FiberEntry, so that every
// frame's destructors run.
struct Unwind {};

// Ends the block: records the fault and unwinds this fiber.
[[noreturn]] void Fault(const std::string& what) {
  Block& b = *current_block;
  if (b.fault.empty()) {
    b.fault = std::string(b.spec->name) + ": " + ThreadName(b, *current_fiber) + ": " + what;
  }
  throw Unwind{};
}

// Waits for the scheduler; unwinds if the block faulted meanwhile.
void Wait() {
  SwitchToScheduler();
  if (!current_block->fault.empty()) throw Unwind{};
}

// __FILE__ of one call site is one literal, so usually one pointer.
bool SameFile(const char* a, const char* b) { return a == b || std::strcmp(a, b) == 0; }

std::string Site(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

void FiberEntry() {
#if SMALLEM_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_bottom, &scheduler_stack_size);
#endif
  RaceAcquire(&block_start_order);
  try {
    (*current_block->body)();
  } catch (const Unwind&) {
  }
  current_fiber->state = State::kDone;
  RaceRelease(&block_end_order);
#if SMALLEM_EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, scheduler_stack_bottom, scheduler_stack_size);
#endif
#if SMALLEM_EMU_RACECHECK
  RaceSwitchTo(scheduler_race_context);
#endif
  SwitchStacks(&current_fiber->sp, scheduler_sp);  // never resumed
  __builtin_unreachable();
}

// Resumes `f` until it waits or ends.
void Resume(Fiber& f) {
  current_fiber = &f;
  f.started = true;
#if SMALLEM_EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
#endif
#if SMALLEM_EMU_RACECHECK
  RaceSwitchTo(f.race_context);
#endif
  SwitchStacks(&scheduler_sp, f.sp);
#if SMALLEM_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  current_fiber = nullptr;
}

// Points f at the start of FiberEntry on its own stack: the frame
// SwitchStacks pops (six callee-saved registers, then the address it
// returns to), above it a null return address for FiberEntry itself.
void StartFiber(Fiber& f) {
  f.started = false;
  auto* top = reinterpret_cast<uintptr_t*>(f.stack + kStackBytes);  // 16-byte aligned
  top[-1] = 0;
  top[-2] = reinterpret_cast<uintptr_t>(&FiberEntry);
  for (int i = 3; i <= 8; ++i) top[-i] = 0;
  f.sp = top - 8;
}

void EnsureFibers(int n) {
  while (static_cast<int>(fibers.size()) < n) {
    Fiber f;
    void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
      std::fprintf(stderr, "emulator: cannot map a fiber stack\n");
      std::abort();
    }
    f.stack = static_cast<char*>(stack);
#if SMALLEM_EMU_RACECHECK
    f.race_context = __tsan_create_fiber(0);
#endif
    fibers.push_back(f);
  }
}

// Why the block cannot go on: every live thread waits and no wait can end.
std::string DescribeDeadlock(const Block& b) {
  std::string text = "deadlock: ";
  int shown = 0;
  for (int i = 0; i < b.threads && shown < 4; ++i) {
    const Fiber& f = fibers[i];
    if (f.state != State::kWaiting) continue;
    text += (shown++ ? "; " : "") + ThreadName(b, f) + " waits at " + Site(f.file, f.line);
  }
  int done = 0;
  for (int i = 0; i < b.threads; ++i) done += fibers[i].state == State::kDone;
  if (done > 0) text += "; " + std::to_string(done) + " thread(s) of the block have returned";
  return text;
}

}  // namespace

std::string RunBlock(const LaunchSpec& spec, const std::function<void()>& body, uint3 block_idx,
                     std::mt19937_64* order) {
  Block b;
  b.spec = &spec;
  b.body = &body;
  b.idx = block_idx;
  b.threads = static_cast<int>(spec.block.x * spec.block.y * spec.block.z);
  b.warps.resize((b.threads + kWarp - 1) / kWarp);
  b.shared.assign(spec.dynamic_smem + 256, 0xff);  // NaN pattern; 256: alignment slack
  EnsureFibers(b.threads);
  current_block = &b;
  for (int i = 0; i < b.threads; ++i) {
    Fiber& f = fibers[i];
    f.linear = i;
    f.idx = {i % spec.block.x, (i / spec.block.x) % spec.block.y,
             i / (spec.block.x * spec.block.y)};
    f.state = State::kReady;
    StartFiber(f);
#if SMALLEM_EMU_RACECHECK
    // A race report names the two threads by these.
    __tsan_set_fiber_name(f.race_context, (std::string(spec.name) + " " + ThreadName(b, f)).c_str());
#endif
  }
#if SMALLEM_EMU_RACECHECK
  scheduler_race_context = __tsan_get_current_fiber();
#endif
  RaceRelease(&block_start_order);
  std::vector<int> ready;
  for (;;) {
    ready.clear();
    for (int i = 0; i < b.threads; ++i) {
      if (fibers[i].state == State::kReady) ready.push_back(i);
    }
    if (ready.empty()) break;
    if (order != nullptr) std::shuffle(ready.begin(), ready.end(), *order);
    for (int i : ready) {
      if (fibers[i].state != State::kReady) continue;
      Resume(fibers[i]);
      if (!b.fault.empty()) break;
    }
    if (!b.fault.empty()) break;
  }
  if (!b.fault.empty()) {
    // Unwind the threads stopped at a synchronization point, so that their
    // frames are destroyed; threads that never started stay unstarted.
    for (int i = 0; i < b.threads; ++i) {
      if (fibers[i].started && fibers[i].state != State::kDone) Resume(fibers[i]);
    }
#if SMALLEM_EMU_ASAN
    // Frames left by an exception keep their redzones poisoned; the next
    // block's threads start on clean stacks.
    for (int i = 0; i < b.threads; ++i) __asan_unpoison_memory_region(fibers[i].stack, kStackBytes);
#endif
  } else {
    for (int i = 0; i < b.threads; ++i) {
      if (fibers[i].state == State::kWaiting) {
        b.fault = std::string(spec.name) + ": block (" + std::to_string(block_idx.x) + "," +
                  std::to_string(block_idx.y) + "," + std::to_string(block_idx.z) + "): " +
                  DescribeDeadlock(b);
        break;
      }
    }
  }
  RaceAcquire(&block_end_order);
  current_block = nullptr;
  return b.fault;
}

const uint3& ThreadIdx() { return current_fiber->idx; }
const uint3& BlockIdx() { return current_block->idx; }
const dim3& BlockDim() { return current_block->spec->block; }
const dim3& GridDim() { return current_block->spec->grid; }

void* DynamicShared(size_t align) {
  auto base = reinterpret_cast<uintptr_t>(current_block->shared.data());
  if (align == 0) align = 1;
  base = (base + align - 1) / align * align;
  return reinterpret_cast<void*>(base);
}

void Trap(const char* file, int line) { Fault("__trap() at " + Site(file, line)); }
void DeviceFault(const char* what, const char* file, int line) {
  Fault(std::string(what) + " at " + Site(file, line));
}

void SyncThreads(const char* file, int line) {
  Block& b = *current_block;
  Fiber& self = *current_fiber;
  self.state = State::kWaiting;
  self.file = file;
  self.line = line;
  char* order = &b.barrier_order[b.barrier_generation & 1];
  RaceRelease(order);
  if (++b.barrier_arrived == b.threads) {
    for (int i = 0; i < b.threads; ++i) {
      Fiber& f = fibers[i];
      if (f.line != line || !SameFile(f.file, file)) {
        Fault("barrier divergence: __syncthreads at " + Site(file, line) + ", but " +
              ThreadName(b, f) + " waits at " + Site(f.file, f.line));
      }
    }
    b.barrier_arrived = 0;
    ++b.barrier_generation;
    for (int i = 0; i < b.threads; ++i) fibers[i].state = State::kReady;
  }
  Wait();
  RaceAcquire(order);
}

namespace {

// The lane whose value lane `lane` receives, or -1 for its own.
int SourceLane(int kind, int lane, int arg, int width) {
  const int base = lane / width * width;
  switch (kind) {
    case kShfl: return base + ((arg % width) + width) % width;
    case kShflXor: {
      const int src = lane ^ arg;
      return src < base + width ? src : lane;
    }
    case kShflUp: return lane - arg >= base ? lane - arg : lane;
    case kShflDown: return lane + arg < base + width ? lane + arg : lane;
  }
  return -1;
}

}  // namespace

uint64_t WarpExchange(int kind, unsigned mask, uint64_t value, int arg, int width,
                      const char* file, int line) {
  Block& b = *current_block;
  Fiber& self = *current_fiber;
  const int lane = self.linear % kWarp;
  const int warp_index = self.linear / kWarp;
  Warp& w = b.warps[warp_index];
  const char* what = kind == kBallot     ? "__ballot_sync"
                     : kind == kAny      ? "__any_sync"
                     : kind == kAll      ? "__all_sync"
                     : kind == kSyncWarp ? "__syncwarp"
                                         : "__shfl_*_sync";
  if ((mask >> lane & 1u) == 0) {
    Fault(std::string(what) + " at " + Site(file, line) + ": the calling lane " +
          std::to_string(lane) + " is not in its mask");
  }
  const int warp_lanes = std::min(kWarp, b.threads - warp_index * kWarp);
  if (warp_lanes < kWarp && (mask >> warp_lanes) != 0) {
    Fault(std::string(what) + " at " + Site(file, line) + ": mask names lanes past the block's last thread");
  }
  if (width <= 0 || width > kWarp || (width & (width - 1)) != 0) {
    Fault(std::string(what) + " at " + Site(file, line) + ": width must be a power of 2 up to 32");
  }
  if (w.arrived != 0) {
    const Fiber& first = fibers[warp_index * kWarp + __builtin_ctz(w.arrived)];
    if (w.mask != mask || w.kind != kind || first.line != line ||
        !SameFile(first.file, file)) {
      Fault(std::string(what) + " at " + Site(file, line) + " with mask " + std::to_string(mask) +
            ", but lane " + std::to_string(__builtin_ctz(w.arrived)) + " waits at " +
            Site(first.file, first.line) + " with mask " + std::to_string(w.mask));
    }
  } else {
    w.mask = mask;
    w.kind = kind;
  }
  self.state = State::kWaiting;
  self.file = file;
  self.line = line;
  self.deposit = value;
  self.arg = arg;
  char* order = &w.order[w.generation & 1];
  RaceRelease(order);
  w.arrived |= 1u << lane;
  if (w.arrived == mask) {
    uint64_t votes = 0;
    for (int l = 0; l < kWarp; ++l) {
      if (mask >> l & 1u) votes |= (fibers[warp_index * kWarp + l].deposit != 0 ? 1ull : 0ull) << l;
    }
    for (int l = 0; l < kWarp; ++l) {
      if ((mask >> l & 1u) == 0) continue;
      Fiber& f = fibers[warp_index * kWarp + l];
      if (kind == kBallot) {
        f.result = votes;
      } else if (kind == kAny) {
        f.result = votes != 0;
      } else if (kind == kAll) {
        f.result = votes == mask;
      } else if (kind != kSyncWarp) {
        const int src = SourceLane(kind, l, f.arg, width);
        if ((mask >> src & 1u) == 0) {
          Fault("__shfl_*_sync at " + Site(file, line) + ": lane " + std::to_string(l) +
                " reads lane " + std::to_string(src) + ", which is not in the mask");
        }
        f.result = fibers[warp_index * kWarp + src].deposit;
      }
      f.state = State::kReady;
    }
    w.arrived = 0;
    ++w.generation;
  }
  Wait();
  RaceAcquire(order);
  return self.result;
}

void SyncWarp(unsigned mask, const char* file, int line) {
  WarpExchange(kSyncWarp, mask, 0, 0, kWarp, file, line);
}

}  // namespace smallem::emu
