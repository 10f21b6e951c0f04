#include "strata/config/parse.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <initializer_list>

namespace strata::config {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Built by appending: GCC 12 warns falsely (-Wrestrict) on literal + std::string temporaries.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out.append(p);
  return out;
}
std::string quoted(std::string_view s) { return cat({"\"", s, "\""}); }

}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

Parsed<double> parse_number(std::string_view raw) {
  const std::string_view s = trim(raw);
  if (s.empty()) return Parsed<double>::fail("empty value");
  // Grammar check first: [+-] digits [. digits] [(e|E) [+-] digits], at least one digit in the mantissa.
  size_t i = 0;
  if (s[i] == '+' || s[i] == '-') ++i;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return Parsed<double>::fail(cat({"not a number: ", quoted(s)}));
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return Parsed<double>::fail(cat({"not a number: ", quoted(s)}));
  }
  if (i != s.size()) return Parsed<double>::fail(cat({"not a number: ", quoted(s)}));
  const std::string_view body = s[0] == '+' ? s.substr(1) : s;
  double v = 0.0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
  if (ec != std::errc() || end != body.data() + body.size() || !std::isfinite(v))
    return Parsed<double>::fail(cat({"not a finite number: ", quoted(s)}));
  return Parsed<double>::ok(v);
}

Parsed<int64_t> parse_int(std::string_view raw, int64_t lo, int64_t hi) {
  const std::string_view s = trim(raw);
  if (s.empty()) return Parsed<int64_t>::fail("empty value");
  const std::string_view body = s[0] == '+' ? s.substr(1) : s;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
  if (body.empty() || ec != std::errc() || end != body.data() + body.size())
    return Parsed<int64_t>::fail(cat({"not an integer: ", quoted(s)}));
  if (v < lo || v > hi)
    return Parsed<int64_t>::fail(
        cat({std::to_string(v), " is outside [", std::to_string(lo), ", ", std::to_string(hi), "]"}));
  return Parsed<int64_t>::ok(v);
}

Parsed<bool> parse_bool(std::string_view raw) {
  const std::string_view s = trim(raw);
  std::string l(s);
  for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "1" || l == "true" || l == "on" || l == "yes") return Parsed<bool>::ok(true);
  if (l == "0" || l == "false" || l == "off" || l == "no") return Parsed<bool>::ok(false);
  return Parsed<bool>::fail(cat({"not a boolean (1/0, true/false, on/off, yes/no): ", quoted(s)}));
}

Parsed<Schedule> parse_schedule(std::string_view s) {
  if (trim(s).empty()) return Parsed<Schedule>::fail("empty value");
  Schedule out;
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    const std::string_view item =
        s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (out.size == static_cast<int>(out.values.size()))
      return Parsed<Schedule>::fail(cat({"more than ", std::to_string(out.values.size()), " values"}));
    if (trim(item).empty())
      return Parsed<Schedule>::fail(cat({"empty item ", std::to_string(out.size + 1), " (stray comma?)"}));
    const auto v = parse_number(item);
    if (!v.value) return Parsed<Schedule>::fail(cat({"item ", std::to_string(out.size + 1), ": ", v.error}));
    if (*v.value < 0.0 || *v.value > 1.0)
      return Parsed<Schedule>::fail(
          cat({"item ", std::to_string(out.size + 1), ": ", trim(item), " is outside [0, 1]"}));
    out.values[static_cast<size_t>(out.size++)] = static_cast<float>(*v.value);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return Parsed<Schedule>::ok(out);
}

Parsed<CacheSize> parse_cache_size(std::string_view text) {
  using P = Parsed<CacheSize>;
  std::string s(trim(text));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto squoted = [](std::string_view t) { return cat({"'", t, "'"}); };
  if (s.empty()) return P::fail("empty cache size");
  if (s.size() > 32) return P::fail(cat({"cache size ", squoted(text.substr(0, 32)), "... is too long"}));
  CacheSize out;
  if (s.back() == '%') {
    const Parsed<double> v = parse_number(std::string_view(s).substr(0, s.size() - 1));
    if (!v.value) return P::fail(cat({squoted(text), " is not a percentage: ", v.error}));
    if (!(*v.value > 0.0 && *v.value <= 100.0)) return P::fail(cat({"percentage ", text, " must be in (0, 100]"}));
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
  const Parsed<double> v = parse_number(s);
  if (!v.value) return P::fail(cat({squoted(text), " is not a size (bytes, K/M/G/T, or a percentage): ", v.error}));
  const double bytes = *v.value * scale;
  if (!(bytes >= 0.0) || bytes > std::ldexp(1.0, 60)) return P::fail(cat({"cache size ", text, " is out of range"}));
  out.bytes = static_cast<uint64_t>(bytes);
  if (out.bytes == 0 && bytes > 0.0) return P::fail(cat({"cache size ", text, " is less than one byte"}));
  return P::ok(out);
}

}  // namespace strata::config
