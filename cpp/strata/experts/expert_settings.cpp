#include "strata/experts/expert_settings.h"

#include <cctype>
#include <cmath>

namespace strata::experts {
namespace {

std::string lower(std::string_view s) {
  std::string l(config::trim(s));
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l;
}

const std::string* find(const config::EnvMap& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// 'text' (built by appends: GCC 12 warns falsely on chained operator+ with a leading literal).
std::string quoted(std::string_view text) {
  std::string q;
  q.reserve(text.size() + 2);
  q += '\'';
  q.append(text.data(), text.size());
  q += '\'';
  return q;
}

}  // namespace

config::Parsed<CacheSize> parse_cache_size(std::string_view text) {
  using P = config::Parsed<CacheSize>;
  std::string s = lower(text);
  if (s.empty()) return P::fail("empty cache size");
  if (s.size() > 32) return P::fail("cache size " + quoted(text.substr(0, 32)) + "... is too long");
  CacheSize out;
  if (s.back() == '%') {
    const config::Parsed<double> v = config::parse_number(std::string_view(s).substr(0, s.size() - 1));
    if (!v.value) return P::fail(quoted(text) + " is not a percentage: " + v.error);
    if (!(*v.value > 0.0 && *v.value <= 100.0)) return P::fail("percentage " + std::string(text) + " must be in (0, 100]");
    out.fraction = *v.value / 100.0;
    return P::ok(out);
  }
  // Optional unit: b, k, kb, kib, m, mb, mib, ... (all powers of 1024).
  double scale = 1.0;
  if (!s.empty() && s.back() == 'b') s.pop_back();
  if (!s.empty() && s.back() == 'i') s.pop_back();
  if (!s.empty()) {
    const char u = s.back();
    const int shift = u == 'k' ? 10 : u == 'm' ? 20 : u == 'g' ? 30 : u == 't' ? 40 : 0;
    if (shift) {
      scale = std::ldexp(1.0, shift);
      s.pop_back();
    }
  }
  const config::Parsed<double> v = config::parse_number(s);
  if (!v.value) return P::fail(quoted(text) + " is not a size (bytes, K/M/G/T, or a percentage): " + v.error);
  const double bytes = *v.value * scale;
  if (!(bytes >= 0.0) || bytes > std::ldexp(1.0, 60)) return P::fail("cache size " + std::string(text) + " is out of range");
  out.bytes = static_cast<uint64_t>(bytes);
  if (out.bytes == 0 && bytes > 0.0) return P::fail("cache size " + std::string(text) + " is less than one byte");
  return P::ok(out);
}

ExpertSettingsResult parse_expert_settings(const config::EnvMap& env) {
  ExpertSettingsResult r;
  ExpertStoreConfig c;
  std::string problem;
  auto reject = [&](const char* name, const std::string& why) {
    if (problem.empty()) problem = std::string(name) + ": " + why;
  };
  if (const std::string* v = find(env, "STRATA_EXPERT_MODE")) {
    const std::string m = lower(*v);
    if (m == "mmap") c.mode = ExpertMode::Mmap;
    else if (m == "stream") c.mode = ExpertMode::Stream;
    else reject("STRATA_EXPERT_MODE", quoted(*v) + " is not mmap or stream");
  }
  if (const std::string* v = find(env, "STRATA_EXPERT_CACHE")) {
    const config::Parsed<CacheSize> p = parse_cache_size(*v);
    if (p.value) {
      c.cache_bytes = p.value->bytes;
      c.cache_fraction = p.value->fraction;
    } else {
      reject("STRATA_EXPERT_CACHE", p.error);
    }
  }
  if (const std::string* v = find(env, "STRATA_EXPERT_DIRECT_IO")) {
    const std::string m = lower(*v);
    if (m == "auto") c.direct_io = DirectIo::Auto;
    else if (m == "on" || m == "1" || m == "true" || m == "yes") c.direct_io = DirectIo::On;
    else if (m == "off" || m == "0" || m == "false" || m == "no") c.direct_io = DirectIo::Off;
    else reject("STRATA_EXPERT_DIRECT_IO", quoted(*v) + " is not auto, on or off");
  }
  if (const std::string* v = find(env, "STRATA_EXPERT_IO_THREADS")) {
    const config::Parsed<int64_t> p = config::parse_int(*v, 0, 64);
    if (p.value) c.io_threads = static_cast<int>(*p.value);
    else reject("STRATA_EXPERT_IO_THREADS", p.error);
  }
  if (!problem.empty()) {
    r.diagnostic = problem + " — the expert-store settings fall back to their defaults (mmap)";
    return r;
  }
  r.config = c;
  return r;
}

}  // namespace strata::experts
