#include "metal/host/device.h"

#include <cstdio>

#include "strata/util/error.h"

namespace strata::mtl {

namespace {
FunctionConstants& put(FunctionConstants& fc, uint16_t index, bool is_bool, uint32_t v) {
  for (int i = 0; i < fc.count; ++i)
    if (fc.values[i].index == index) {
      fc.values[i] = {index, is_bool, v};
      return fc;
    }
  if (fc.count == FunctionConstants::kMax)
    throw_error(ErrorKind::Internal, "FunctionConstants: more than " + std::to_string(FunctionConstants::kMax));
  fc.values[fc.count++] = {index, is_bool, v};
  return fc;
}
}  // namespace

FunctionConstants& FunctionConstants::set_bool(uint16_t index, bool v) { return put(*this, index, true, v ? 1u : 0u); }
FunctionConstants& FunctionConstants::set_uint(uint16_t index, uint32_t v) { return put(*this, index, false, v); }

std::string FunctionConstants::key() const {
  std::string k;
  for (int i = 0; i < count; ++i) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "|%u%c%u", unsigned{values[i].index}, values[i].is_bool ? 'b' : 'u',
                  values[i].value);
    k.append(buf);
  }
  return k;
}

}  // namespace strata::mtl
