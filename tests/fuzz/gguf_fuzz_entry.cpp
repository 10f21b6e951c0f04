#include "gguf_fuzz_entry.h"

#include <exception>
#include <functional>

#include "strata/gguf/gguf_file.h"
#include "strata/util/error.h"

namespace strata_fuzz {
namespace {

using strata::gguf::File;
using strata::gguf::Value;
using strata::gguf::ValueType;

volatile uint64_t g_sink = 0;  // keeps the reads from being optimised away

// "" for a well-formed Format error about the input, else the problem.
std::string judge(const strata::Error& e) {
  const std::string msg = e.what();
  const std::string prefix = std::string(kInputName) + ": ";
  if (e.kind() != strata::ErrorKind::Format) return "error of kind " + std::to_string(int(e.kind())) + ": " + msg;
  if (msg.compare(0, prefix.size(), prefix) != 0) return "message does not name the input: " + msg;
  if (msg.find('\n') != std::string::npos) return "message spans lines: " + msg;
  return "";
}

void walk(const Value& v) {
  switch (v.type()) {
    case ValueType::STRING: g_sink = g_sink + v.to_string().size(); break;
    case ValueType::BOOL: g_sink = g_sink + v.to_bool(); break;
    case ValueType::ARRAY: v.for_each([](const Value& e) { walk(e); }); break;
    default:
      g_sink = g_sink + static_cast<uint64_t>(v.to_f64() != 0.0) + v.to_u64().value_or(1) +
               static_cast<uint64_t>(v.to_i64().value_or(2));
  }
}

// Calls fn; a strata::Error it throws must be a well-formed Format error.
std::string expect_ok_or_format(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const strata::Error& e) {
    return judge(e);
  }
  return "";
}

std::string exercise(const File& f) {
  // Invariants the reader promises once open() succeeds.
  if (f.alignment() == 0 || (f.alignment() & (f.alignment() - 1)) != 0) return "alignment not a power of two";
  if (f.data_offset() % f.alignment() != 0) return "data section not aligned";
  for (const auto& t : f.tensors()) {
    if (t.nbytes == 0 || t.offset < f.data_offset() || t.offset > f.size() || t.nbytes > f.size() - t.offset)
      return "tensor '" + t.name + "' outside the file";
    if ((t.offset - f.data_offset()) % f.alignment() != 0) return "tensor '" + t.name + "' not aligned";
    if (f.find_tensor(t.name) != &t) return "find_tensor disagrees for '" + t.name + "'";
    const uint8_t* p = f.tensor_data(t);
    g_sink = g_sink + p[0] + p[t.nbytes - 1];
  }
  for (const auto& e : f.metadata()) {
    if (f.find(e.key) != &e.value) return "find disagrees for a key";
    walk(e.value);
    const std::string& k = e.key;
    const std::function<void()> getters[] = {
        [&] { g_sink = g_sink + f.get_u32(k); },
        [&] { g_sink = g_sink + static_cast<uint64_t>(f.get_i32(k)); },
        [&] { g_sink = g_sink + f.get_u64(k); },
        [&] { g_sink = g_sink + static_cast<uint64_t>(f.get_i64(k)); },
        [&] { g_sink = g_sink + static_cast<uint64_t>(f.get_f32(k) != 0.0f); },
        [&] { g_sink = g_sink + static_cast<uint64_t>(f.get_f64(k) != 0.0); },
        [&] { g_sink = g_sink + f.get_bool(k); },
        [&] { g_sink = g_sink + f.get_string(k).size(); },
        [&] { g_sink = g_sink + f.get_string_array(k).size(); },
        [&] { g_sink = g_sink + f.get_i32_array(k).size(); },
        [&] { g_sink = g_sink + f.get_u32_array(k).size(); },
        [&] { g_sink = g_sink + f.get_i64_array(k).size(); },
        [&] { g_sink = g_sink + f.get_f32_array(k).size(); },
    };
    for (const auto& g : getters)
      if (std::string problem = expect_ok_or_format(g); !problem.empty()) return "getter: " + problem;
  }
  return "";
}

}  // namespace

std::string check_gguf_input(const uint8_t* data, std::size_t size, bool* parsed) {
  if (parsed) *parsed = false;
  try {
    const auto f = File::open_memory(data, size, kInputName);
    if (parsed) *parsed = true;
    return exercise(*f);
  } catch (const strata::Error& e) {
    return judge(e);
  } catch (const std::exception& e) {
    return std::string("non-strata exception: ") + e.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace strata_fuzz
