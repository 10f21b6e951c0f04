# GGUF reader fuzzing (docs/gguf-reader.md).
# - fuzz_gguf_driver: always built; ctest runs 20k deterministic mutations of in-code seeds.
# - fuzz_gguf: the libFuzzer target, built when the compiler is clang and links -fsanitize=fuzzer
#   (STRATA_LIBFUZZER, default ON then). The reader's sources are compiled into it again with
#   coverage instrumentation and ASan/UBSan so libFuzzer sees inside the parser.
set(_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})

add_executable(fuzz_gguf_driver ${_fuzz_dir}/fuzz_gguf_driver.cpp ${_fuzz_dir}/gguf_fuzz_entry.cpp)
target_link_libraries(fuzz_gguf_driver PRIVATE strata_core)
target_compile_options(fuzz_gguf_driver PRIVATE ${STRATA_WARNINGS})
add_test(NAME fuzz_gguf_driver COMMAND fuzz_gguf_driver --iterations 20000 --seed 1
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

set(_libfuzzer_default OFF)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
  check_cxx_source_compiles(
    "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, std::size_t) { return 0; }"
    STRATA_HAVE_LIBFUZZER)
  unset(CMAKE_REQUIRED_FLAGS)
  set(_libfuzzer_default ${STRATA_HAVE_LIBFUZZER})
endif()
option(STRATA_LIBFUZZER "Build the libFuzzer target fuzz_gguf (clang only)" ${_libfuzzer_default})

if(STRATA_LIBFUZZER)
  set(_src ${CMAKE_CURRENT_SOURCE_DIR}/cpp/strata)
  file(GLOB _gguf_sources CONFIGURE_DEPENDS ${_src}/gguf/*.cpp)
  add_executable(fuzz_gguf ${_fuzz_dir}/fuzz_gguf.cpp ${_fuzz_dir}/gguf_fuzz_entry.cpp ${_gguf_sources}
                 ${_src}/quant/types.cpp ${_src}/util/error.cpp ${_src}/util/mmap_file.cpp)
  target_include_directories(fuzz_gguf PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cpp)
  target_compile_options(fuzz_gguf PRIVATE ${STRATA_WARNINGS} -g -O1 -fno-omit-frame-pointer
                         -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
  target_link_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
