#include "strata/util/error.h"

namespace strata {

void throw_error(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

void throw_file_error(ErrorKind kind, const std::string& path, const std::string& what) {
  throw Error(kind, path + ": " + what);
}

}  // namespace strata
