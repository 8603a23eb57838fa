# Finds OpenBLAS's CBLAS through pkg-config (Debian: libopenblas-*-dev).
# Defines mla::openblas and MlaOpenBLAS_FOUND.
if(PKG_CONFIG_FOUND)
  pkg_check_modules(MLA_PC_OPENBLAS QUIET IMPORTED_TARGET openblas)
endif()
if(MLA_PC_OPENBLAS_FOUND)
  find_path(MLA_OPENBLAS_CBLAS_DIR cblas.h HINTS ${MLA_PC_OPENBLAS_INCLUDE_DIRS}
            PATH_SUFFIXES openblas)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MlaOpenBLAS REQUIRED_VARS MLA_PC_OPENBLAS_FOUND
                                  MLA_OPENBLAS_CBLAS_DIR)
if(MlaOpenBLAS_FOUND AND NOT TARGET mla::openblas)
  add_library(mla::openblas INTERFACE IMPORTED)
  target_link_libraries(mla::openblas INTERFACE PkgConfig::MLA_PC_OPENBLAS)
  target_include_directories(mla::openblas INTERFACE ${MLA_OPENBLAS_CBLAS_DIR})
endif()
