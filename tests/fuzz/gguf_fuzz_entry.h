#pragma once
// The one fuzz entry for the GGUF reader, shared by the libFuzzer target (fuzz_gguf.cpp) and the
// standalone driver (fuzz_gguf_driver.cpp): open the bytes, and if they open, read every value,
// call every getter and touch every tensor's first and last byte.
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata_fuzz {

// The name the input is opened under; every error message must start with it.
inline constexpr const char* kInputName = "fuzz.gguf";

// "" when the input either opened (and satisfied the reader's invariants) or was refused with a
// well-formed strata::Error(Format); otherwise what went wrong (another exception type or error
// kind, a message not naming the input or spanning lines, a broken invariant). A crash is a crash.
std::string check_gguf_input(const uint8_t* data, std::size_t size, bool* parsed = nullptr);

}  // namespace strata_fuzz
