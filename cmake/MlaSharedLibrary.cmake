# libmla.so: the objects of libmla.a (the whole archive) linked into a shared
# library with soname libmla.so.<major>. The objects are compiled with hidden
# visibility, so the library exports what the public headers declare MLA_API
# and nothing else (tests/package/check_symbols.cmake checks it). OpenMP,
# OpenBLAS, SLEEF and the GPU runtime are linked privately: a program
# linking libmla.so needs none of them at its own link.

# A shared library needs a source of its own; everything else is the archive.
set(_mla_shared_src ${CMAKE_CURRENT_BINARY_DIR}/mla_shared.c)
if(NOT EXISTS ${_mla_shared_src})
  file(WRITE ${_mla_shared_src} "/* libmla.so is the objects of libmla.a (whole archive). */\n")
endif()

add_library(mla_shared SHARED ${_mla_shared_src})
add_library(mla::mla_shared ALIAS mla_shared)
add_library(mla::mla ALIAS mla_shared)
target_link_libraries(mla_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,mla>")
target_include_directories(mla_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
set_target_properties(mla_shared PROPERTIES
  OUTPUT_NAME mla
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  EXPORT_NAME mla_shared
  LINKER_LANGUAGE C
  # the GPU runtime outside the system's library path (CUDA's lib64) stays
  # findable from the installed library
  INSTALL_RPATH_USE_LINK_PATH ON)
target_link_options(mla_shared PRIVATE LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/libmla.map)
set_property(TARGET mla_shared APPEND PROPERTY LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/libmla.map)
# Every symbol the objects use must come from a library linked here (the
# sanitizer runtimes are the executable's, so not under MLA_SANITIZE).
if(NOT MLA_SANITIZE)
  target_link_options(mla_shared PRIVATE LINKER:--no-undefined)
endif()
