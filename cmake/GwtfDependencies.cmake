# Finds the six dependencies, all from Debian 12 packages (scripts/install-deps).
# Facts behind each step: docs/toolchain.md.

find_package(Threads REQUIRED)

# --- CAF 0.17.6: no CMake config and no .pc file; imported targets by hand.
find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY caf_core)
find_library(CAF_IO_LIBRARY caf_io)
if(NOT CAF_INCLUDE_DIR OR NOT CAF_CORE_LIBRARY OR NOT CAF_IO_LIBRARY)
  message(FATAL_ERROR "CAF not found (need libcaf-dev): run scripts/install-deps")
endif()
add_library(CAF::core SHARED IMPORTED)
set_target_properties(CAF::core PROPERTIES
  IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR}
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(CAF::io SHARED IMPORTED)
set_target_properties(CAF::io PROPERTIES
  IMPORTED_LOCATION ${CAF_IO_LIBRARY}
  INTERFACE_LINK_LIBRARIES CAF::core)

# --- LibTorch 1.13 (CPU). Its target forces C++14 on itself only; ours set C++17.
find_package(Torch REQUIRED)

# --- Cap'n Proto 0.9 (schemas compiled by capnp_generate_cpp).
find_package(CapnProto REQUIRED)

# --- Boost.Graph 1.74: the algorithms we use are header-only.
find_package(Boost 1.74 REQUIRED COMPONENTS graph)

# --- yaml-cpp 0.7: target `yaml-cpp`, no namespace.
find_package(yaml-cpp REQUIRED)

# --- nlohmann-json 3.11 (header-only): the inspection shell's JSON.
find_package(nlohmann_json 3.10 REQUIRED)

# --- libedit (BSD): line editing, history and completion for the interactive shell.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBEDIT REQUIRED IMPORTED_TARGET libedit)

# --- doctest 2.4 (tests only).
if(GWTF_BUILD_TESTS)
  find_package(doctest REQUIRED)
  include(doctest)
endif()
