# Install rules, the CMake package (find_package(mla)) and mla.pc.
#   mla::mla_shared  libmla.so (mla::mla is an alias of it)
#   mla::mla_static  libmla.a, whose link interface carries what it needs
#                    (OpenMP, OpenBLAS, SLEEF, the GPU runtime), found again by
#                    mlaConfig.cmake with find_dependency.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(_mla_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/mla)
install(TARGETS mla mla_shared EXPORT mlaTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/mla DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mlaTargets NAMESPACE mla:: DESTINATION ${_mla_cmake_dir})

get_property(MLA_GPU_CONFIG_DEP GLOBAL PROPERTY MLA_GPU_CONFIG_DEP)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/mlaConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/mlaConfig.cmake INSTALL_DESTINATION ${_mla_cmake_dir})
# 0.x: a minor version may change the ABI.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mlaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mlaConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/mlaConfigVersion.cmake
  ${CMAKE_CURRENT_SOURCE_DIR}/cmake/FindMlaOpenBLAS.cmake
  ${CMAKE_CURRENT_SOURCE_DIR}/cmake/FindMlaSleef.cmake
  DESTINATION ${_mla_cmake_dir})

# mla.pc, relocatable: prefix is found from the file's own place.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(MLA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _rel /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" _rel "${_rel}")
  set(MLA_PC_PREFIX "\${pcfiledir}/${_rel}")
endif()
set(MLA_PC_REQUIRES_PRIVATE "")
set(MLA_PC_LIBS_PRIVATE "")
if(MLA_HAVE_OPENMP)
  foreach(_l IN LISTS OpenMP_C_LIB_NAMES)
    string(APPEND MLA_PC_LIBS_PRIVATE " -l${_l}")
  endforeach()
endif()
if(MLA_HAVE_OPENBLAS)
  string(APPEND MLA_PC_REQUIRES_PRIVATE " openblas")
endif()
if(MLA_HAVE_SLEEF)
  string(APPEND MLA_PC_REQUIRES_PRIVATE " sleef")
endif()
get_property(_gpu_libs GLOBAL PROPERTY MLA_GPU_PC_LIBS)
if(_gpu_libs)
  string(APPEND MLA_PC_LIBS_PRIVATE " ${_gpu_libs}")
endif()
string(APPEND MLA_PC_LIBS_PRIVATE " -lm")
string(STRIP "${MLA_PC_REQUIRES_PRIVATE}" MLA_PC_REQUIRES_PRIVATE)
string(STRIP "${MLA_PC_LIBS_PRIVATE}" MLA_PC_LIBS_PRIVATE)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/mla.pc.in
               ${CMAKE_CURRENT_BINARY_DIR}/mla.pc.in-configured @ONLY)
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/mla.pc
     INPUT ${CMAKE_CURRENT_BINARY_DIR}/mla.pc.in-configured)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mla.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
