# Metal backend (issue 8): kernel bodies shared by MSL and C++ (metal/kernels), the threadgroup
# emulator (metal/emu), the dispatch plan and encoders (metal/host). Included once from the top
# CMakeLists.txt, after the test targets exist.
#
# strata_metal_emu: the emulator, the C++ entry points of every kernel and the dispatch plan with the
# emulator encoder; built on every platform (the Linux parity path of R-7).
# On Apple platforms the .metal entry points are compiled into strata.metallib and the metal-cpp
# encoder is added (metal/host/*_apple.cpp).

option(STRATA_METAL_SANITIZE "Build the Metal emulator and its tests with -fsanitize=address,undefined" OFF)
# metal-cpp (https://developer.apple.com/metal/cpp/) is header-only; point STRATA_METAL_CPP_DIR at it.
set(STRATA_METAL_CPP_DIR "" CACHE PATH "metal-cpp headers (the folder holding Metal/Metal.hpp), Apple only")
set(_strata_with_metal_cpp OFF)
if(APPLE AND STRATA_METAL_CPP_DIR)
  set(_strata_with_metal_cpp ON)
endif()

file(GLOB STRATA_METAL_EMU_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_LIST_DIR}/emu/*.cpp ${CMAKE_CURRENT_LIST_DIR}/host/*.cpp)
list(FILTER STRATA_METAL_EMU_SOURCES EXCLUDE REGEX "_apple\\.cpp$")
if(_strata_with_metal_cpp)
  # backend.cpp can create the GPU device there: it moves to strata_metal (below).
  list(FILTER STRATA_METAL_EMU_SOURCES EXCLUDE REGEX "/host/backend\\.cpp$")
endif()

add_library(strata_metal_emu STATIC ${STRATA_METAL_EMU_SOURCES})
target_include_directories(strata_metal_emu PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(strata_metal_emu PUBLIC strata_core)
# Kernel bodies promise bitwise results (fast path vs generic, fused vs split): no FMA contraction.
target_compile_options(strata_metal_emu PRIVATE ${STRATA_WARNINGS} -ffp-contract=off)

set(_strata_metal_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
if(STRATA_METAL_SANITIZE)
  target_compile_options(strata_metal_emu PRIVATE ${_strata_metal_san})
endif()

if(STRATA_TESTS)
  file(GLOB _strata_metal_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/../tests/cpp/test_metal*.cpp)
  foreach(src ${_strata_metal_tests})
    get_filename_component(name ${src} NAME_WE)
    target_link_libraries(${name} PRIVATE strata_metal_emu)
    target_compile_options(${name} PRIVATE -ffp-contract=off)
    target_compile_definitions(${name} PRIVATE STRATA_METAL_SOURCE_DIR="${CMAKE_CURRENT_LIST_DIR}")
    if(STRATA_METAL_SANITIZE)
      target_compile_options(${name} PRIVATE ${_strata_metal_san})
      target_link_options(${name} PRIVATE -fsanitize=address,undefined)
    endif()
  endforeach()
endif()

if(APPLE)
  file(GLOB _strata_metal_apple CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/host/*_apple.cpp)
  if(_strata_with_metal_cpp)
    add_library(strata_metal STATIC ${_strata_metal_apple} ${CMAKE_CURRENT_LIST_DIR}/host/backend.cpp)
    target_include_directories(strata_metal SYSTEM PUBLIC ${STRATA_METAL_CPP_DIR})
    target_link_libraries(strata_metal PUBLIC strata_metal_emu "-framework Metal" "-framework Foundation")
    target_compile_options(strata_metal PRIVATE ${STRATA_WARNINGS})
    target_compile_definitions(strata_metal PRIVATE STRATA_HAVE_METAL_DEVICE=1)
  endif()
  # The .metal entry points -> strata.metallib, compiled with fast math and FP contraction off so
  # the bitwise promises the emulator checks hold on the GPU too.
  file(GLOB _strata_metal_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/kernels/*.metal)
  file(GLOB _strata_metal_headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/kernels/*.h
                                                   ${CMAKE_CURRENT_LIST_DIR}/../cpp/strata/quant/iq_tables/*.inc)
  if(_strata_metal_sources)
    set(_airs "")
    foreach(src ${_strata_metal_sources})
      get_filename_component(stem ${src} NAME_WE)
      set(air ${CMAKE_CURRENT_BINARY_DIR}/metal/${stem}.air)
      add_custom_command(OUTPUT ${air}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/metal
        COMMAND xcrun -sdk macosx metal -std=metal3.0 -fno-fast-math -ffp-contract=off
                -I ${CMAKE_CURRENT_LIST_DIR}/.. -c ${src} -o ${air}
        DEPENDS ${src} ${_strata_metal_headers}
        COMMENT "metal ${stem}.metal")
      list(APPEND _airs ${air})
    endforeach()
    add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/strata.metallib
      COMMAND xcrun -sdk macosx metallib ${_airs} -o ${CMAKE_CURRENT_BINARY_DIR}/strata.metallib
      DEPENDS ${_airs} COMMENT "metallib strata.metallib")
    add_custom_target(strata_metallib ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/strata.metallib)
  endif()
  # The device-parity test runs its device B on the GPU when the metal-cpp device is built.
  if(STRATA_TESTS AND TARGET strata_metal AND TARGET test_metal_device_parity AND TARGET strata_metallib)
    target_link_libraries(test_metal_device_parity PRIVATE strata_metal)
    target_compile_definitions(test_metal_device_parity PRIVATE STRATA_HAVE_METAL_DEVICE=1
                               STRATA_METALLIB="${CMAKE_CURRENT_BINARY_DIR}/strata.metallib")
    add_dependencies(test_metal_device_parity strata_metallib)
  endif()
endif()

# The Python module gets strata._strata.MetalEngine (cpp/bindings/bind_metal.cpp).
if(TARGET _strata)
  if(TARGET strata_metal)
    target_link_libraries(_strata PRIVATE strata_metal)
  else()
    target_link_libraries(_strata PRIVATE strata_metal_emu)
  endif()
endif()
