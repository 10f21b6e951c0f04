#pragma once
// A tiny test harness for the ctest binaries: CHECK macros that count failures, TEST cases
// registered statically, and a main() that runs them all and prints "N passed, N failed".
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace strata_test {

struct Case {
  const char* name;
  std::function<void()> fn;
};
inline std::vector<Case>& cases() {
  static std::vector<Case> v;
  return v;
}
inline int& failures() {
  static int f = 0;
  return f;
}
struct Register {
  Register(const char* name, std::function<void()> fn) { cases().push_back({name, std::move(fn)}); }
};
inline void fail(const char* file, int line, const std::string& what) {
  ++failures();
  if (failures() <= 50) std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
}

}  // namespace strata_test

#define STRATA_TEST_CAT2(a, b) a##b
#define STRATA_TEST_CAT(a, b) STRATA_TEST_CAT2(a, b)
#define TEST(name)                                                         \
  static void name();                                                      \
  static ::strata_test::Register STRATA_TEST_CAT(reg_, name)(#name, name); \
  static void name()

#define CHECK(cond)                                              \
  do {                                                           \
    if (!(cond)) ::strata_test::fail(__FILE__, __LINE__, #cond); \
  } while (0)
#define CHECK_MSG(cond, msg)                                                                  \
  do {                                                                                        \
    if (!(cond)) ::strata_test::fail(__FILE__, __LINE__, std::string(#cond) + " — " + (msg)); \
  } while (0)
#define CHECK_EQ(a, b)                                                                                              \
  do {                                                                                                              \
    const auto& _a = (a);                                                                                           \
    const auto& _b = (b);                                                                                           \
    if (!(_a == _b))                                                                                                \
      ::strata_test::fail(__FILE__, __LINE__,                                                                       \
                          std::string(#a " == " #b " (") + std::to_string(_a) + " vs " + std::to_string(_b) + ")"); \
  } while (0)
#define CHECK_NEAR(a, b, tol)                                                                                      \
  do {                                                                                                             \
    const double _a = static_cast<double>(a), _b = static_cast<double>(b);                                         \
    if (!(std::fabs(_a - _b) <= (tol)))                                                                            \
      ::strata_test::fail(__FILE__, __LINE__,                                                                      \
                          std::string(#a " ~ " #b " (") + std::to_string(_a) + " vs " + std::to_string(_b) + ")"); \
  } while (0)
#define CHECK_THROWS(expr)                                                                 \
  do {                                                                                     \
    bool _threw = false;                                                                   \
    try {                                                                                  \
      (void)(expr);                                                                        \
    } catch (...) {                                                                        \
      _threw = true;                                                                       \
    }                                                                                      \
    if (!_threw) ::strata_test::fail(__FILE__, __LINE__, "expected an exception: " #expr); \
  } while (0)

// Each test binary includes this header in exactly one file with STRATA_TEST_MAIN defined.
#ifdef STRATA_TEST_MAIN
int main() {
  int passed = 0, failed = 0;
  for (auto& c : ::strata_test::cases()) {
    const int before = ::strata_test::failures();
    try {
      c.fn();
    } catch (const std::exception& e) {
      ::strata_test::fail(__FILE__, __LINE__, std::string(c.name) + " threw: " + e.what());
    }
    if (::strata_test::failures() == before) {
      ++passed;
    } else {
      ++failed;
      std::fprintf(stderr, "case %s failed\n", c.name);
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
#endif
