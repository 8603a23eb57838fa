# The exported and global symbols of the two libraries (cmake -P):
#   libmla.so exports exactly the functions the public headers declare
#   MLA_API (no more: nothing internal leaks; no fewer: every declaration
#   has its definition exported);
#   libmla.a defines no global symbol outside the library's prefix, so a
#   static link cannot collide with the program's own names.
# -D SHARED=<libmla.so> -D STATIC=<libmla.a> -D HEADERS=<include/mla>
# -D NM=<nm> -D CXXFILT=<c++filt>
cmake_minimum_required(VERSION 3.25)
foreach(v SHARED STATIC HEADERS NM CXXFILT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_symbols.cmake: -D ${v}=... missing")
  endif()
endforeach()

# --- the API: every `MLA_API <type> <name>(` of the headers, comments and
# preprocessor lines removed
set(api "")
file(GLOB headers ${HEADERS}/*.h)
foreach(h IN LISTS headers)
  file(READ ${h} text)
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  string(REGEX REPLACE "(^|\n)[ \t]*#[^\n]*" "\\1" text "${text}")
  string(REGEX MATCHALL "MLA_API[^;{}()#]*\\(" decls "${text}")
  foreach(d IN LISTS decls)
    string(REGEX MATCH "([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\\($" _ "${d}")
    list(APPEND api ${CMAKE_MATCH_1})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES api)
list(LENGTH api n_api)
if(n_api LESS 50)
  message(FATAL_ERROR "only ${n_api} MLA_API declarations found under ${HEADERS}")
endif()

function(symbols out)
  execute_process(COMMAND ${NM} ${ARGN} OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${ARGN} failed (${rc})")
  endif()
  string(REGEX REPLACE "\n" ";" lines "${text}")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

# --- libmla.so: `addr type name` of the dynamic symbol table
symbols(lines -D --defined-only ${SHARED})
set(exported "")
set(bad "")
foreach(l IN LISTS lines)
  if(l MATCHES "^[0-9a-fA-F]* *([A-Za-z]) (.+)$")
    set(name ${CMAKE_MATCH_2})
    string(REGEX REPLACE "@.*" "" name "${name}")
    list(APPEND exported ${name})
    if(NOT name IN_LIST api)
      list(APPEND bad ${name})
    endif()
  endif()
endforeach()
set(missing "")
foreach(f IN LISTS api)
  if(NOT f IN_LIST exported)
    list(APPEND missing ${f})
  endif()
endforeach()
list(LENGTH exported n_exp)
if(bad)
  list(JOIN bad "\n  " t)
  message(SEND_ERROR "libmla.so exports symbols no public header declares MLA_API:\n  ${t}")
endif()
if(missing)
  list(JOIN missing "\n  " t)
  message(SEND_ERROR "declared MLA_API but not exported by libmla.so:\n  ${t}")
endif()

# --- libmla.a: strong global definitions (weak ones, W/V, merge at link)
symbols(lines -g --defined-only ${STATIC})
set(foreign "")
set(n_glob 0)
foreach(l IN LISTS lines)
  if(NOT l MATCHES "^[0-9a-fA-F]* +([A-UX-Z]) (.+)$")
    continue()
  endif()
  set(name ${CMAKE_MATCH_2})
  math(EXPR n_glob "${n_glob} + 1")
  # clang's id of a HIP object (one per file, named by a hash), and ASan's
  # ODR indicator of an mla_ global (the sanitized build)
  if(name MATCHES "^mla_" OR name MATCHES "^__hip_cuid_[0-9a-f]+$"
     OR name MATCHES "^__odr_asan[._]mla_")
    continue()
  endif()
  if(name MATCHES "^_Z")
    # C++ (the HIP backend): a name in the mla_ prefix, in an anonymous
    # namespace, or nvcc's launch stub of a kernel in one (nvcc gives the
    # names of anonymous namespaces external linkage, with a per-file hash)
    execute_process(COMMAND ${CXXFILT} ${name} OUTPUT_VARIABLE dem OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(dem MATCHES "^mla_" OR dem MATCHES "^\\(anonymous namespace\\)::"
       OR dem MATCHES "^__device_stub__ZN[0-9]+_GLOBAL__N_")
      continue()
    endif()
    set(name "${name} (${dem})")
  endif()
  list(APPEND foreign "${name}")
endforeach()
if(foreign)
  list(JOIN foreign "\n  " t)
  message(SEND_ERROR "libmla.a defines global symbols outside the mla_ prefix:\n  ${t}")
endif()
message(STATUS "${n_api} MLA_API functions declared, ${n_exp} exported by libmla.so; "
               "${n_glob} strong global symbols in libmla.a")
