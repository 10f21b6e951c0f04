#pragma once
// Strict parsers for setting values. Each returns the value or an error message saying what is wrong
// (the caller prefixes the setting's name). No locale, no hex, no partial parses.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace strata::config {

// STRATA_* variable -> its text (absent key = unset).
using EnvMap = std::map<std::string, std::string>;

template <class T>
struct Parsed {
  std::optional<T> value;
  std::string error;  // set when value is empty
  static Parsed ok(T v) { return Parsed{std::move(v), {}}; }
  static Parsed fail(std::string e) { return Parsed{std::nullopt, std::move(e)}; }
};

std::string_view trim(std::string_view s);
// A finite decimal number (optional sign, digits, fraction, exponent); surrounding whitespace allowed.
Parsed<double> parse_number(std::string_view s);
// A decimal integer in [lo, hi]; surrounding whitespace allowed.
Parsed<int64_t> parse_int(std::string_view s, int64_t lo, int64_t hi);
// 1/0, true/false, on/off, yes/no (any case).
Parsed<bool> parse_bool(std::string_view s);

// Up to 8 probabilities, stored in bounded storage.
struct Schedule {
  std::array<float, 8> values{};
  int size = 0;
};
// "p0, p1, ..." — 1 to 8 finite numbers in [0, 1], comma-separated, whitespace allowed around each.
Parsed<Schedule> parse_schedule(std::string_view s);

// A cache size: bytes, or a fraction of all experts.
struct CacheSize {
  uint64_t bytes = 0;
  double fraction = 0.0;  // > 0: a fraction in (0, 1]
};
// Bytes with an optional K/M/G/T unit (powers of 1024: "512M", "1.5G", "2GiB"), or a percentage of
// all experts ("25%"); "0" = room for every expert. At most 32 characters.
Parsed<CacheSize> parse_cache_size(std::string_view text);

}  // namespace strata::config
