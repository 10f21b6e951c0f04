# AArch64 builds only: the driver that count-neon-insns.sh runs under qemu with an
# instruction-counting plugin (not a ctest).
if(STRATA_ARCH_ARM)
  add_executable(neon_kernel_insns ${CMAKE_CURRENT_LIST_DIR}/neon_kernel_insns.cpp)
  target_link_libraries(neon_kernel_insns PRIVATE strata_core)
  target_include_directories(neon_kernel_insns PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests/cpp)
  target_compile_options(neon_kernel_insns PRIVATE ${STRATA_WARNINGS})
endif()
