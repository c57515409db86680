// CPU/CUDA parity of the ops on token ids: the embedding (gather and
// deterministic scatter-add), the cross-entropy loss (also in place, and
// with a bf16 gradient) and the training-batch gather.
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::Bf16ActivationOpsTest;
using testing::OpParityTest;
using testing::Pair;
using testing::Side;
using testing::kCpu;
using testing::kF32Tolerance;
using testing::kGpu;

TEST_F(OpParityTest, EmbeddingForwardAndBackward) {
  const int64_t vocab = 11, cols = 7, count = 37;
  Pair ids = I32({count}, RandomIds(count, vocab));  // many repeats
  Pair table = Random({vocab, cols}), out = Random({count, cols});
  Pair g = Random({count, cols}), g_table = Random({vocab, cols});
  Both([&](Backend& be, Side s) {
    be.EmbeddingForward({.ids = ids[s], .table = table[s], .out = out[s]});
    be.EmbeddingBackward({.ids = ids[s], .grad_out = g[s], .grad_table = g_table[s]});
  });
  ExpectClose(out, kF32Tolerance, "embedding");
  ExpectClose(g_table, kF32Tolerance, "embedding backward");

  // More tokens than one segment of the backward kernel, wider rows.
  const int64_t big_vocab = 300, big_cols = 300, big_count = 3000;
  Pair big_ids = I32({big_count}, RandomIds(big_count, big_vocab));
  Pair big_g = Random({big_count, big_cols}), big_table_g = Random({big_vocab, big_cols});
  Both([&](Backend& be, Side s) {
    be.EmbeddingBackward({.ids = big_ids[s], .grad_out = big_g[s],
                          .grad_table = big_table_g[s]});
  });
  ExpectClose(big_table_g, kF32Tolerance, "embedding backward, 3000 tokens");
}

TEST_F(OpParityTest, CrossEntropyForwardAndBackward) {
  for (auto [rows, vocab, scale] : {std::tuple<int64_t, int64_t, float>{7, 1031, 1.0f},
                                    {5, 11, 30.0f}, {3, 5000, 8.0f}}) {
    Pair logits = Random({rows, vocab}, scale);
    Pair targets = I32({rows}, RandomIds(rows, static_cast<int32_t>(vocab)));
    Pair losses = Random({rows}), lse = Random({rows});
    Pair g = Random({rows}), g_logits = Random({rows, vocab});
    Both([&](Backend& be, Side s) {
      be.CrossEntropyForward({.logits = logits[s], .targets = targets[s], .losses = losses[s],
                              .lse = lse[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(vocab);
    ExpectClose(losses, kF32Tolerance, "cross_entropy losses " + shape);
    ExpectClose(lse, kF32Tolerance, "cross_entropy lse " + shape);
    Pair ref_lse = F32({rows}, Read(kCpu, lse[kCpu]));
    Both([&](Backend& be, Side s) {
      be.CrossEntropyBackward({.logits = logits[s], .targets = targets[s], .lse = ref_lse[s],
                               .grad_losses = g[s], .grad_logits = g_logits[s]});
    });
    ExpectClose(g_logits, kF32Tolerance, "cross_entropy backward " + shape);
    // The loss's in-place backward: the logits overwritten with their
    // gradient, which the accumulation into zeros gives too.
    Pair zeros = Zeros({rows, vocab});
    Both([&](Backend& be, Side s) {
      be.CrossEntropyBackward({.logits = logits[s], .targets = targets[s], .lse = ref_lse[s],
                               .grad_losses = g[s], .grad_logits = zeros[s]});
      be.CrossEntropyBackward({.logits = logits[s], .targets = targets[s], .lse = ref_lse[s],
                               .grad_losses = g[s], .grad_logits = logits[s],
                               .overwrite = true});
    });
    ExpectClose(logits, kF32Tolerance, "cross_entropy backward in place " + shape);
    // Equal values (a −0 overwritten is +0 accumulated, hence not bytes).
    EXPECT_EQ(Read(kGpu, logits[kGpu]), Read(kGpu, zeros[kGpu])) << "in place, " << shape;
  }
}

// The loss's backward in the speed mode: the gradient of f32 logits written
// (or added) as bf16.
TEST_F(Bf16ActivationOpsTest, CrossEntropyWritesABf16Gradient) {
  const int64_t rows = 7, vocab = 1031;
  Pair logits = Random({rows, vocab}, 4.0f);
  Pair targets = I32({rows}, RandomIds(rows, static_cast<int32_t>(vocab)));
  Pair losses = Zeros({rows}), lse = Zeros({rows}), g = Random({rows});
  Both([&](Backend& be, Side s) {
    be.CrossEntropyForward({.logits = logits[s], .targets = targets[s], .losses = losses[s],
                            .lse = lse[s]});
  });
  const Pair ref_lse = F32({rows}, Read(kCpu, lse[kCpu]));
  for (bool overwrite : {true, false}) {
    Pair grad = RandomStored({rows, vocab}, kBf16);
    Both([&](Backend& be, Side s) {
      be.CrossEntropyBackward({.logits = logits[s], .targets = targets[s], .lse = ref_lse[s],
                               .grad_losses = g[s], .grad_logits = grad[s],
                               .overwrite = overwrite});
    });
    ExpectCloseAct(grad, overwrite ? "cross_entropy backward, written" : "cross_entropy backward");
  }
}

TEST_F(OpParityTest, GatherSequencesMatchesTheCpu) {
  const int64_t count = 1001, rows = 7, time = 37;
  Pair tokens = I32({count}, RandomIds(count, 8192));
  std::vector<int32_t> starts = RandomIds(rows, static_cast<int32_t>(count - time - 1));
  starts[0] = 0;
  starts[1] = static_cast<int32_t>(count - time - 1);  // the last possible start
  Pair device_starts = I32({rows}, starts);
  Pair inputs = I32({rows * time}, std::vector<int32_t>(rows * time, -1));
  Pair targets = I32({rows * time}, std::vector<int32_t>(rows * time, -1));
  Both([&](Backend& be, Side s) {
    be.GatherSequences({.tokens = tokens[s], .starts = device_starts[s], .inputs = inputs[s],
                        .targets = targets[s], .time = time});
  });
  for (const Pair* p : {&inputs, &targets}) {
    std::vector<int32_t> gpu(rows * time);
    gpu_->CopyToHost(gpu.data(), (*p)[kGpu].data, (*p)[kGpu].bytes());
    const int32_t* cpu = (*p)[kCpu].i32();
    EXPECT_TRUE(std::equal(gpu.begin(), gpu.end(), cpu))
        << (p == &inputs ? "inputs" : "targets") << " differ";
  }
}

}  // namespace
}  // namespace smallem
