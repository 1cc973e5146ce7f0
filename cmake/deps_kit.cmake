# Dependencies from a kit folder (FOLIO_DEPS_KIT, made by scripts/gpu_kit.sh)
# instead of the system's packages, for machines that have a compiler and the
# CUDA toolkit but no Debian -dev packages (the GPU machine): {fmt} and
# nlohmann-json header-only, PCRE2 as a static library, GoogleTest from
# source. The server and the folio binary need CLI11 and Boost's Beast
# and Asio (header-only, but tens of MiB of headers against the call's 64 MiB)
# and are left out; the tests, tools and the engine are all there.
set(kit "${FOLIO_DEPS_KIT}")
foreach(f include/fmt/core.h include/nlohmann/json.hpp include/pcre2.h lib/libpcre2-8.a googletest/CMakeLists.txt)
  if(NOT EXISTS "${kit}/${f}")
    message(FATAL_ERROR "FOLIO_DEPS_KIT=${kit} lacks ${f}; make the kit with scripts/gpu_kit.sh on a machine that "
                        "has the packages scripts/setup.sh installs")
  endif()
endforeach()

add_library(fmt::fmt INTERFACE IMPORTED)
set_target_properties(fmt::fmt PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${kit}/include"
                                          INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${kit}/include")
add_library(PkgConfig::PCRE2 STATIC IMPORTED)
set_target_properties(PkgConfig::PCRE2 PROPERTIES IMPORTED_LOCATION "${kit}/lib/libpcre2-8.a"
                                                  INTERFACE_INCLUDE_DIRECTORIES "${kit}/include")
set(FOLIO_BUILD_SERVER OFF CACHE BOOL "" FORCE)
set(FOLIO_BUILD_BENCH OFF CACHE BOOL "" FORCE)
