#pragma once
// The one error type of the core. Every failure a user can cause (bad file, bad setting, bad
// request) is thrown as strata::Error with a category; the bindings map the categories onto
// Python exception classes under strata.StrataError.
#include <stdexcept>
#include <string>

namespace strata {

enum class ErrorKind {
  Format,    // a model/session file is malformed or inconsistent
  IO,        // the OS refused a read, write or map
  Config,    // a setting is malformed or out of range
  Value,     // a caller passed an invalid argument
  Internal,  // a broken invariant inside strata (a bug)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);

// Format an error about a file: "<path>: <what>".
[[noreturn]] void throw_file_error(ErrorKind kind, const std::string& path, const std::string& what);

}  // namespace strata

#define STRATA_CHECK(cond, kind, msg)                  \
  do {                                                 \
    if (!(cond)) ::strata::throw_error((kind), (msg)); \
  } while (0)
