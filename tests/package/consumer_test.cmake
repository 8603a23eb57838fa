# Builds and runs tests/package/consumer against an install tree (cmake -P),
# one of four ways (-D WAY=...):
#   cmake-shared  find_package(mla) and mla::mla        (libmla.so)
#   cmake-static  find_package(mla) and mla::mla_static (libmla.a)
#   pc-shared     pkg-config --cflags --libs mla
#   pc-static     pkg-config --static --libs mla, libmla.a taken for -lmla
# and checks that the program needs libmla.so.0 exactly in the shared ways.
# -D PREFIX=<install tree> -D LIBDIR=<its lib dir, relative> -D SOURCE=<consumer dir> -D WORK=<scratch dir>
# -D VERSION=<x.y.z> -D CC=<C compiler> -D READELF=<readelf>
# -D GENERATOR=<cmake generator> -D FLAGS=<extra compile/link flags, e.g. sanitizers>
# -D PKG_CONFIG=<pkg-config> (the pc ways)
cmake_minimum_required(VERSION 3.25)
foreach(v WAY PREFIX LIBDIR SOURCE WORK VERSION CC READELF GENERATOR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consumer_test.cmake: -D ${v}=... missing")
  endif()
endforeach()
separate_arguments(flags UNIX_COMMAND "${FLAGS}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${cmd}\nfailed (${rc}):\n${out}${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

set(dir ${WORK}/${WAY})
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(exe ${dir}/consumer)
if(WAY MATCHES "^cmake-(shared|static)$")
  run(${CMAKE_COMMAND} -S ${SOURCE} -B ${dir} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_C_COMPILER=${CC} -DCMAKE_PREFIX_PATH=${PREFIX} -DMLA_LINK=${CMAKE_MATCH_1}
      "-DCMAKE_C_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")
  run(${CMAKE_COMMAND} --build ${dir})
elseif(WAY MATCHES "^pc-(shared|static)$")
  set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${LIBDIR}/pkgconfig)
  run(${PKG_CONFIG} --cflags mla)
  separate_arguments(cflags UNIX_COMMAND "${run_out}")
  if(CMAKE_MATCH_1 STREQUAL "static")
    run(${PKG_CONFIG} --static --libs mla)
    # With both libraries installed the linker takes libmla.so for -lmla;
    # a static link asks for the archive by name.
    string(REPLACE "-lmla " "-l:libmla.a " run_out "${run_out} ")
  else()
    run(${PKG_CONFIG} --libs mla)
  endif()
  separate_arguments(libs UNIX_COMMAND "${run_out}")
  run(${CC} ${flags} ${cflags} ${SOURCE}/consumer.c -o ${exe} ${libs} ${flags})
else()
  message(FATAL_ERROR "WAY must be cmake-shared, cmake-static, pc-shared or pc-static")
endif()

run(${READELF} -d ${exe})
string(FIND "${run_out}" "[libmla.so.0]" needs)
if(WAY MATCHES "shared$" AND needs EQUAL -1)
  message(FATAL_ERROR "${WAY}: ${exe} does not load libmla.so.0:\n${run_out}")
elseif(WAY MATCHES "static$" AND NOT needs EQUAL -1)
  message(FATAL_ERROR "${WAY}: ${exe} loads libmla.so.0, expected libmla.a linked in")
endif()
set(ENV{LD_LIBRARY_PATH} ${PREFIX}/${LIBDIR})
run(${exe} ${VERSION})
message(STATUS "${WAY}: ${run_out}")
