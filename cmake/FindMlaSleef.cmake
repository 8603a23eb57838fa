# Finds SLEEF through pkg-config (Debian: libsleef-dev, sleef.pc).
# Defines mla::sleef and MlaSleef_FOUND.
if(PKG_CONFIG_FOUND)
  pkg_check_modules(MLA_PC_SLEEF QUIET IMPORTED_TARGET sleef)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MlaSleef REQUIRED_VARS MLA_PC_SLEEF_FOUND)
if(MlaSleef_FOUND AND NOT TARGET mla::sleef)
  add_library(mla::sleef INTERFACE IMPORTED)
  target_link_libraries(mla::sleef INTERFACE PkgConfig::MLA_PC_SLEEF)
endif()
