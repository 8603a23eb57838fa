# Optional CPU dependencies, found through CMake and pkg-config. Each sets
# MLA_HAVE_<NAME> and an imported target; the build summary reports them.
find_package(PkgConfig QUIET)

set(MLA_HAVE_OPENMP OFF)
if(MLA_WITH_OPENMP)
  find_package(OpenMP COMPONENTS C)
  if(OpenMP_C_FOUND)
    set(MLA_HAVE_OPENMP ON)
    # The name libmla.a's installed link interface refers to; mlaConfig.cmake
    # defines it again in a consumer project.
    if(NOT TARGET mla::openmp)
      add_library(mla::openmp INTERFACE IMPORTED)
      target_link_libraries(mla::openmp INTERFACE OpenMP::OpenMP_C)
    endif()
  endif()
endif()

set(MLA_HAVE_OPENBLAS OFF)
if(MLA_WITH_OPENBLAS)
  find_package(MlaOpenBLAS)
  if(MlaOpenBLAS_FOUND)
    set(MLA_HAVE_OPENBLAS ON)
  endif()
endif()

set(MLA_HAVE_SLEEF OFF)
if(MLA_WITH_SLEEF)
  find_package(MlaSleef)
  if(MlaSleef_FOUND)
    set(MLA_HAVE_SLEEF ON)
  endif()
endif()
