#pragma once
// The C++ entry points of every kernel (the emulator's counterpart of the .metal entry points): a
// table from kernel name to an emulator KernelFn that unpacks an EmuBinding into the body's arguments.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/emu/emulator.h"

namespace strata::emu {

inline constexpr int kMaxBufferArgs = 31;
inline constexpr int kMaxFunctionConstants = 16;

// What an encoder has bound when it dispatches: buffer pointers (base + offset; set_bytes data lives
// in `bytes`), function constant values by index.
struct EmuBinding {
  void* buf[kMaxBufferArgs] = {};
  std::size_t len[kMaxBufferArgs] = {};  // bytes available from the pointer (bounds of set_bytes data)
  uint32_t fc[kMaxFunctionConstants] = {};
  bool fc_set[kMaxFunctionConstants] = {};
  std::vector<uint8_t> bytes[kMaxBufferArgs];

  template <class T>
  T* ptr(int i) const {
    return static_cast<T*>(buf[i]);
  }
  template <class T>
  const T& arg(int i) const {
    return *static_cast<const T*>(buf[i]);
  }
  bool fc_bool(int i) const { return fc[i] != 0; }
};

// The entry of a kernel by its .metal name; nullptr if there is none.
KernelFn find_kernel(const char* name);
// Every registered kernel name (tests check the .metal files name the same set).
std::vector<const char*> kernel_names();

}  // namespace strata::emu
