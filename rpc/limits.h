// Limits of the wire protocol, shared by the coordinator's services and
// every client (smallemctl, the worker daemon): one place says how large a
// message, a header block or a dataset chunk may be.
#ifndef SMALLEM_RPC_LIMITS_H_
#define SMALLEM_RPC_LIMITS_H_

#include <cstdint>

namespace smallem {

// Largest request or response message, bytes (a grid of ~10k runs fits).
inline constexpr int kMaxMessageBytes = 64 << 20;
// Largest request header block, bytes (gRPC's default, stated: a bearer
// token and gRPC's own headers fit many times over).
inline constexpr int kMaxMetadataBytes = 8 << 10;

// Dataset transfers (UploadDataset, FetchDataset) move files in chunks of at
// most this many bytes.
inline constexpr int64_t kDatasetChunkBytes = 1 << 20;
// Bytes per dataset file, at most: 4 G tokens of train.bin (u16), far beyond
// the budgets this tool runs (the reference run reads 49 M tokens), so that a
// client's declared size cannot make the coordinator accept unbounded data.
inline constexpr int64_t kDatasetFileBytes = int64_t{8} << 30;

// Checkpoint transfers (UploadCheckpoint, FetchCheckpoint) move a file in
// chunks of kDatasetChunkBytes; a checkpoint holds at most this many bytes
// (weights and two optimizer moments of a ~2.5 G-parameter model).
inline constexpr int64_t kCheckpointFileBytes = int64_t{32} << 30;

}  // namespace smallem

#endif  // SMALLEM_RPC_LIMITS_H_
