# Install rules and a CMake package config so that find_package(mla) works.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS mla EXPORT mlaTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/mla DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mlaTargets NAMESPACE mla:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mla)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/mlaConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/mlaConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mla)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mlaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mlaConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/mlaConfigVersion.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mla)
