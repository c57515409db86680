// The emulated device's library_types.h: the data types cuBLASLt names.
#ifndef SMALLEM_EMULATOR_LIBRARY_TYPES_H_
#define SMALLEM_EMULATOR_LIBRARY_TYPES_H_

enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
};
using cudaDataType = cudaDataType_t;

#endif  // SMALLEM_EMULATOR_LIBRARY_TYPES_H_
