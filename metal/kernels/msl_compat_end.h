// Closes msl_compat.h in C++ translation units: the MSL address-space words stop being macros, so
// code after the kernel bodies (entry wrappers, host code) sees ordinary C++ again.
#if !defined(__METAL_VERSION__)
#undef kernel
#undef device
#undef constant
#undef thread
#undef threadgroup
#endif
