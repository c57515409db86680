# Proof that the emulated suite catches GPU bugs (docs/gpu-notes.md): each
# entry plants one classic bug in a copy of a real kernel file, builds the
# emulated kernel tests against that copy, and registers a ctest that passes
# only if the tests FAIL. The copy is made at configure time and the build
# stops if the text to replace is no longer in the kernel, so the table
# cannot silently go stale.
#
# planted_bug(NAME FILE KERNELS FILTER FIND REPLACE): FILE under kernels/
# (a .cu or a .cuh); KERNELS the .cu files rebuilt with the copy; FILTER the
# tests that must fail.
add_library(smallem_emulator_kernel_cases OBJECT ${CMAKE_CURRENT_SOURCE_DIR}/emulator/kernels_test.cc)
target_link_libraries(smallem_emulator_kernel_cases PRIVATE smallem_emulator GTest::gtest)

# Writes the copy of kernels/FILE with FIND replaced by REPLACE under
# planted/NAME (set as `root` in the caller).
function(plant name file find replace)
  file(READ ${PROJECT_SOURCE_DIR}/kernels/${file} text)
  # Copied at configure time: an edit of the original configures again, so
  # the copy never lags behind the file it plants a bug in.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/${file})
  string(FIND "${text}" "${find}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "planted bug ${name}: kernels/${file} no longer has the text to replace")
  endif()
  string(REPLACE "${find}" "${replace}" text "${text}")
  set(root ${CMAKE_CURRENT_BINARY_DIR}/planted/${name})
  file(CONFIGURE OUTPUT ${root}/kernels/${file} CONTENT "${text}" @ONLY)
  set(root ${root} PARENT_SCOPE)
endfunction()

function(planted_bug name file kernels filter find replace)
  plant(${name} ${file} "${find}" "${replace}")
  set(sources)
  foreach(kernel ${kernels})
    file(CONFIGURE OUTPUT ${root}/${kernel}.cc CONTENT "#include \"kernels/${kernel}.cu\"\n")
    list(APPEND sources ${root}/${kernel}.cc)
  endforeach()
  add_executable(planted_${name} ${sources} $<TARGET_OBJECTS:smallem_emulator_kernel_cases>)
  # The copy comes first; every other kernel from kernels/ (the archive's
  # members that define the same launchers are not pulled in).
  target_include_directories(planted_${name} BEFORE PRIVATE ${root})
  target_link_libraries(planted_${name} PRIVATE smallem_emulated_kernels GTest::gtest_main)
  add_test(NAME EmulatorPlantedBug.${name}
           COMMAND planted_${name} --gtest_filter=${filter})
  set_tests_properties(EmulatorPlantedBug.${name} PROPERTIES WILL_FAIL TRUE
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endfunction()

planted_bug(dropped_syncthreads cross_entropy.cu cross_entropy *CrossEntropy*
  [[    if (lane == 0) warp_partials[warp] = p;
    __syncthreads();]]
  [[    if (lane == 0) warp_partials[warp] = p;]])
planted_bug(edge_guard_off_by_one rms_norm.cu rms_norm *RmsNorm*
  [[  if (row >= rows) return;
  const int64_t start = row * cols;]]
  [[  if (row > rows) return;
  const int64_t start = row * cols;]])
planted_bug(wrong_shuffle_lane device_util.cuh rms_norm *RmsNorm*
  [[__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16;]]
  [[__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 8;]])
planted_bug(wrong_shuffle_mask cross_entropy.cu cross_entropy *CrossEntropy*
  [[__shfl_xor_sync(kFullMask, p.m, offset)]]
  [[__shfl_xor_sync(0x0000ffffu, p.m, offset)]])
planted_bug(shared_memory_race embedding.cu embedding *EmbeddingBackward*
  [[        if (hit[k]) matches[slot++] = static_cast<int>(threadIdx.x) * kIdsPerThread + k;
      }
      __syncthreads();]]
  [[        if (hit[k]) matches[slot++] = static_cast<int>(threadIdx.x) * kIdsPerThread + k;
      }]])
planted_bug(last_block_unguarded device_util.cuh rms_norm *RmsNorm*
  [[  if (c >= cols) return;]]
  [[]])
planted_bug(uninitialised_accumulator rms_norm.cu rms_norm *RmsNorm*
  [[StoreAct<kMixed>(out, start + c, LoadAct<kMixed>(input, start + c) * rstd * gain[c]);]]
  [[AccumulateAct<kMixed>(out, start + c, LoadAct<kMixed>(input, start + c) * rstd * gain[c]);]])
planted_bug(wrong_grid_stride reduce.cu reduce *Reduce*
  [[       i += int64_t{gridDim.x} * kThreads) {
    const double x = in[i];]]
  [[       i += kThreads) {
    const double x = in[i];]])
planted_bug(misaligned_vector_load attention.cu "attention;attention_delta" *AttentionForward*
  [[    const float4 x = *reinterpret_cast<const float4*>(a + d);]]
  [[    const float4 x = *reinterpret_cast<const float4*>(a + d + 1);]])
planted_bug(bf16_truncated_not_rounded activation_path.cuh add *Bf16*
  [[      const __nv_bfloat16 rounded = __float2bfloat16_rn(v);]]
  [[      __nv_bfloat16 rounded;
      const uint32_t bits = __builtin_bit_cast(uint32_t, v);
      rounded = __builtin_bit_cast(__nv_bfloat16, static_cast<uint16_t>(bits >> 16));]])

# The same for the backend: FILE (a .cu or .cc under kernels/) planted, the
# whole tests/gpu suite on the emulated device linked against the copy, and
# FILTER the tests that must fail.
function(planted_backend_bug name file filter find replace)
  plant(${name} ${file} "${find}" "${replace}")
  get_filename_component(stem ${file} NAME_WE)
  file(CONFIGURE OUTPUT ${root}/${stem}_planted.cc CONTENT "#include \"kernels/${file}\"\n")
  add_executable(planted_${name} ${root}/${stem}_planted.cc
                 $<TARGET_OBJECTS:smallem_emulated_gpu_cases>)
  target_include_directories(planted_${name} BEFORE PRIVATE ${root})
  target_link_libraries(planted_${name} PRIVATE smallem_emulated_kernels GTest::gtest_main)
  # The backend stops the process on a CUDA error (CheckCuda): a death,
  # which WILL_FAIL would not count, so the shell inverts any failure.
  add_test(NAME EmulatorPlantedBug.${name}
           COMMAND sh -c "! \"$0\" '--gtest_filter=${filter}'" $<TARGET_FILE:planted_${name}>)
  set_tests_properties(EmulatorPlantedBug.${name} PROPERTIES
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endfunction()

planted_backend_bug(cublaslt_leading_dimension matmul.cu *MatmulParity*
  [[SMALLEM_BLAS_TRY(MakeLayout(input_type, n, k, n, args.batch, args.stride_b, &plan->a));]]
  [[SMALLEM_BLAS_TRY(MakeLayout(input_type, n, k, n + 1, args.batch, args.stride_b, &plan->a));]])
planted_backend_bug(graph_replays_a_stale_host_value cuda_backend.cc *GraphTest.ReplaysReadStaged*
  [[  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "UploadStaged");]]
  [[  if (capturing_ && (src = Snapshot(src, bytes)) == nullptr) return;
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "UploadStaged");]])

# Racecheck's own: a race planted in a copy of a kernel, the emulator's
# kernel cases run against the copy under ThreadSanitizer (the racecheck
# flavour, emulator/CMakeLists.txt), and ThreadSanitizer must report it with
# both accesses in the planted file (expect_race.sh) — not merely a wrong
# result under one of two schedules.
function(planted_race name file kernels filter find replace)
  plant(race_${name} ${file} "${find}" "${replace}")
  set(sources ${CMAKE_CURRENT_SOURCE_DIR}/emulator/kernels_test.cc)
  foreach(kernel ${kernels})
    file(CONFIGURE OUTPUT ${root}/${kernel}.cc CONTENT "#include \"kernels/${kernel}.cu\"\n")
    list(APPEND sources ${root}/${kernel}.cc)
  endforeach()
  add_executable(planted_race_${name} ${sources})
  target_include_directories(planted_race_${name} BEFORE PRIVATE ${root})
  target_compile_options(planted_race_${name} PRIVATE -fsanitize=thread)
  target_link_libraries(planted_race_${name} PRIVATE smallem_racecheck_kernels GTest::gtest_main)
  add_test(NAME EmulatorPlantedBug.racecheck_${name}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/emulator/expect_race.sh
                   $<TARGET_FILE:planted_race_${name}> ${filter} ${file})
endfunction()

planted_race(shared_memory_race embedding.cu embedding *EmbeddingBackward*
  [[        if (hit[k]) matches[slot++] = static_cast<int>(threadIdx.x) * kIdsPerThread + k;
      }
      __syncthreads();]]
  [[        if (hit[k]) matches[slot++] = static_cast<int>(threadIdx.x) * kIdsPerThread + k;
      }]])
