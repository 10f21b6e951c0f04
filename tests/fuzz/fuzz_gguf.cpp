// libFuzzer target for the GGUF reader (clang: -fsanitize=fuzzer,address). Every input must
// either open or be refused with a well-formed strata::Error(Format); anything else aborts so
// libFuzzer records the input. How to run it: docs/gguf-reader.md.
#include <cstdio>
#include <cstdlib>

#include "gguf_fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string problem = strata_fuzz::check_gguf_input(data, size);
  if (!problem.empty()) {
    std::fprintf(stderr, "fuzz_gguf: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
