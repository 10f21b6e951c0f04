# Benchmarks built with the tests (not run by ctest): window_rows_bench times engine::Window over
# 1..R rows on a real model (docs/benchmarks.md, "Window rows").
add_executable(window_rows_bench ${CMAKE_CURRENT_LIST_DIR}/window_rows_bench.cpp)
target_link_libraries(window_rows_bench PRIVATE strata_core)
target_compile_options(window_rows_bench PRIVATE ${STRATA_WARNINGS})
# pool_decode_bench: decode / prefill per (threads, spin budget) and the pool's dispatches, sleeps,
# context switches and busy CPUs per token (docs/benchmarks.md, "The thread pool").
add_executable(pool_decode_bench ${CMAKE_CURRENT_LIST_DIR}/pool_decode_bench.cpp)
target_link_libraries(pool_decode_bench PRIVATE strata_core)
target_compile_options(pool_decode_bench PRIVATE ${STRATA_WARNINGS})
# repack_k_bench: single-thread GEMV of Q4_K / Q6_K plain and repacked per kernel path (docs/benchmarks.md,
# "Repacked Q4_K and Q6_K").
add_executable(repack_k_bench ${CMAKE_CURRENT_LIST_DIR}/repack_k_bench.cpp)
target_link_libraries(repack_k_bench PRIVATE strata_core)
target_compile_options(repack_k_bench PRIVATE ${STRATA_WARNINGS})
# amx_bench: AMX tile kernels vs the AVX-512 multi-activation kernels of Q8_0_R16 / Q4_0_R16 over an
# expert-sized matrix (docs/benchmarks.md, "AMX").
add_executable(amx_bench ${CMAKE_CURRENT_LIST_DIR}/amx_bench.cpp)
target_link_libraries(amx_bench PRIVATE strata_core)
target_compile_options(amx_bench PRIVATE ${STRATA_WARNINGS})
# float_rows_bench: single-thread F32 / F16 / BF16 dots of decode-step-sized matrices at 1..4 activation
# rows per kernel path (docs/benchmarks.md, "Float matrices at small row counts").
add_executable(float_rows_bench ${CMAKE_CURRENT_LIST_DIR}/float_rows_bench.cpp)
target_link_libraries(float_rows_bench PRIVATE strata_core)
target_compile_options(float_rows_bench PRIVATE ${STRATA_WARNINGS})
# attention_core_bench: attend_group and the attention kernels of one GQA group per ISA path
# (docs/benchmarks.md, "Attention core").
add_executable(attention_core_bench ${CMAKE_CURRENT_LIST_DIR}/attention_core_bench.cpp)
target_link_libraries(attention_core_bench PRIVATE strata_core)
target_compile_options(attention_core_bench PRIVATE ${STRATA_WARNINGS})
# slice_order_bench: one-thread GEMV read rate of 256 MiB as one call, as expert-sized slices in address
# order and shuffled (docs/benchmarks.md, session 14).
add_executable(slice_order_bench ${CMAKE_CURRENT_LIST_DIR}/slice_order_bench.cpp)
target_link_libraries(slice_order_bench PRIVATE strata_core)
target_compile_options(slice_order_bench PRIVATE ${STRATA_WARNINGS})
# moe_dispatch_bench: the decode GEMV's read rate in decode-shaped dispatches (16 random expert slices each)
# against large calls and the read bandwidth, per thread count (docs/benchmarks.md, "Result, session 40").
add_executable(moe_dispatch_bench ${CMAKE_CURRENT_LIST_DIR}/moe_dispatch_bench.cpp)
target_link_libraries(moe_dispatch_bench PRIVATE strata_core)
target_compile_options(moe_dispatch_bench PRIVATE ${STRATA_WARNINGS})
