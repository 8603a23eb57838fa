# Script mode (cmake -P): builds the device-library folder that clang-22
# needs to compile HIP for gfx942/gfx950 against Debian 12's ROCm 5.2 bitcode.
#
#   cmake -DSRC=<Debian bitcode dir> -DOUT=<folder> -DTARGETS="gfx942;gfx950"
#         -DLLVM_DIS=<llvm-dis> -DLLVM_AS=<llvm-as> -P MlaHipDeviceLibs.cmake
#
# ROCm 5.2 predates gfx942/gfx950, so their oclc_isa_version files are made
# from the gfx90a one with the ISA version constant replaced. Each also
# defines __oclc_daz_opt: ROCm 5.2's ocml reads it and clang 22 no longer
# links a file that does, while the isa-version file is linked for every
# target. Nothing binary is kept in the source tree.
foreach(var SRC OUT TARGETS LLVM_DIS LLVM_AS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "MlaHipDeviceLibs.cmake: -D${var}=... is required")
  endif()
endforeach()

file(GLOB bitcode "${SRC}/*.bc")
if(NOT bitcode)
  message(FATAL_ERROR "no device bitcode (*.bc) in ${SRC}; install rocm-device-libs")
endif()
set(template "${SRC}/oclc_isa_version_90a.bc")
if(NOT EXISTS "${template}")
  message(FATAL_ERROR "${template} is missing; it is the template for the new targets")
endif()
file(MAKE_DIRECTORY "${OUT}")
file(COPY ${bitcode} DESTINATION "${OUT}")

execute_process(COMMAND "${LLVM_DIS}" "${template}" -o -
                OUTPUT_VARIABLE ir RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "llvm-dis ${template} failed: ${err}")
endif()
if(NOT ir MATCHES "constant i32 9010")
  message(FATAL_ERROR "unexpected content in ${template}: no 'constant i32 9010'")
endif()

foreach(target IN LISTS TARGETS)
  # gfx<major><minor><stepping>, minor and stepping one hex digit each:
  # the constant is major*1000 + minor*100 + stepping (gfx90a -> 9010).
  if(NOT target MATCHES "^gfx([0-9]+)([0-9a-f])([0-9a-f])$")
    message(FATAL_ERROR "cannot read the ISA version of GPU target '${target}'")
  endif()
  set(major ${CMAKE_MATCH_1})
  math(EXPR minor "0x${CMAKE_MATCH_2}")
  math(EXPR stepping "0x${CMAKE_MATCH_3}")
  math(EXPR version "${major} * 1000 + ${minor} * 100 + ${stepping}")
  string(REPLACE "constant i32 9010" "constant i32 ${version}" out_ir "${ir}")
  string(APPEND out_ir "\n@__oclc_daz_opt = linkonce_odr protected local_unnamed_addr "
                       "addrspace(4) constant i8 0, align 1\n")
  string(REGEX REPLACE "^gfx" "" suffix "${target}")
  set(ll "${OUT}/oclc_isa_version_${suffix}.ll")
  file(WRITE "${ll}" "${out_ir}")
  execute_process(COMMAND "${LLVM_AS}" "${ll}" -o "${OUT}/oclc_isa_version_${suffix}.bc"
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llvm-as ${ll} failed: ${err}")
  endif()
  file(REMOVE "${ll}")
endforeach()
