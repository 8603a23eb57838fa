# The HIP backend's three ways to compile the same .hip sources. Each
# function compiles them and puts the objects into `mla` (a static library,
# so libmla.a holds everything, and libmla.so is made of it), links the GPU
# runtime, and reports the targets in MLA_GPU_TARGETS_STR.
#
# Like the rest of the library the objects have hidden visibility: only the
# MLA_API functions they define (mla_gpu_count, mla_gpu_name) are exported
# from libmla.so, so they are compiled without MLA_STATIC_DEFINE.
#
# Device code is compiled without FMA contraction and without flushing
# denormals: the format kernels must match the host reference bit for bit,
# and kernels that want an FMA write fmaf() explicitly. Host code is built
# without exceptions (nothing throws), so that a C program links libmla.a
# without the C++ runtime on AMD; nvcc's launch stubs need it regardless.

set(_mla_hip_dir ${CMAKE_CURRENT_LIST_DIR})

# The objects join `mla`; the GPU runtime becomes part of its link interface
# because a static libmla.a needs it at the final link. pc_libs is the same
# for mla.pc's Libs.private (generator expressions allowed), config_dep the
# find_dependency() arguments mlaConfig.cmake needs for the runtime's target
# ("" when the runtime is a plain file).
function(_mla_hip_attach objects runtime platform targets_str pc_libs config_dep)
  target_sources(mla PRIVATE ${objects})
  target_link_libraries(mla PUBLIC ${runtime})
  set_property(GLOBAL PROPERTY MLA_GPU_PC_LIBS "${pc_libs}")
  set_property(GLOBAL PROPERTY MLA_GPU_CONFIG_DEP "${config_dep}")
  target_compile_definitions(mla PRIVATE MLA_HAVE_HIP=1 "MLA_HIP_PLATFORM_NAME=\"${platform}\""
                                         "MLA_GPU_TARGETS_STR=\"${targets_str}\"")
endfunction()

# ";" separates CMake list items even inside a compile definition, so the
# list of targets reaches the C string literal with its separators written as
# the octal escape \073 (";"), which the C compiler turns back into ";".
function(_mla_hip_targets_string out)
  list(JOIN ARGN "\\073" s)
  set(${out} "${s}" PARENT_SCOPE)
endfunction()

# --- AMD: clang-22 with Debian 12's ROCm 5.2 headers, runtime and bitcode --
function(mla_hip_build_amd sources)
  set(MLA_HIP_CLANG /usr/lib/llvm-22/bin/clang++ CACHE FILEPATH "clang++ that knows gfx942/gfx950")
  set(MLA_HIP_ROCM_PATH /usr CACHE PATH "Where include/hip lives (--rocm-path)")
  set(MLA_HIP_BITCODE_DIR /usr/lib/x86_64-linux-gnu/amdgcn/bitcode CACHE PATH
      "ROCm device bitcode (rocm-device-libs)")
  get_filename_component(llvm_bin ${MLA_HIP_CLANG} DIRECTORY)
  find_program(MLA_HIP_LLVM_DIS llvm-dis HINTS ${llvm_bin} NO_DEFAULT_PATH REQUIRED)
  find_program(MLA_HIP_LLVM_AS llvm-as HINTS ${llvm_bin} NO_DEFAULT_PATH REQUIRED)
  find_library(MLA_AMDHIP64_LIBRARY amdhip64 REQUIRED)
  if(NOT EXISTS ${MLA_HIP_CLANG})
    message(FATAL_ERROR "MLA_HIP=AMD needs ${MLA_HIP_CLANG} (Debian: clang-22 lld-22 llvm-22)")
  endif()
  if(NOT EXISTS ${MLA_HIP_ROCM_PATH}/include/hip/hip_runtime.h)
    message(FATAL_ERROR "MLA_HIP=AMD needs the HIP headers (Debian: libamdhip64-dev)")
  endif()
  foreach(t IN LISTS MLA_GPU_TARGETS)
    if(NOT t MATCHES "^gfx9")
      message(FATAL_ERROR "MLA_HIP=AMD builds gfx9 targets; '${t}' is not one")
    endif()
  endforeach()

  set(devlib ${CMAKE_CURRENT_BINARY_DIR}/amdgcn-bitcode)
  set(devlib_stamp ${devlib}/.stamp)
  add_custom_command(
    OUTPUT ${devlib_stamp}
    COMMAND ${CMAKE_COMMAND} -DSRC=${MLA_HIP_BITCODE_DIR} -DOUT=${devlib}
            "-DTARGETS=${MLA_GPU_TARGETS}" -DLLVM_DIS=${MLA_HIP_LLVM_DIS}
            -DLLVM_AS=${MLA_HIP_LLVM_AS} -P ${_mla_hip_dir}/MlaHipDeviceLibs.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${devlib_stamp}
    DEPENDS ${_mla_hip_dir}/MlaHipDeviceLibs.cmake
    COMMENT "Generating the gfx device-library folder"
    VERBATIM)

  set(flags -x hip --rocm-path=${MLA_HIP_ROCM_PATH} --rocm-device-lib-path=${devlib}
      -mcode-object-version=5 -D__AMDGCN_WAVEFRONT_SIZE=64 -std=c++17 -O3 -fPIC -fno-exceptions
      -ffp-contract=off -fno-gpu-flush-denormals-to-zero -Wall -Wextra -Wshadow
      -fvisibility=hidden -fvisibility-inlines-hidden
      -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR})
  if(MLA_WERROR)
    list(APPEND flags -Werror)
  endif()
  if(CMAKE_BUILD_TYPE MATCHES "Deb|RelWithDebInfo")
    list(APPEND flags -g)
  endif()
  set(arch_flags "")
  foreach(t IN LISTS MLA_GPU_TARGETS)
    list(APPEND arch_flags --offload-arch=${t})
  endforeach()
  # For hip/isa_report.sh: the same command, minus the arch and output.
  string(REPLACE ";" " " flags_str "${flags}")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/hip_flags.txt "${MLA_HIP_CLANG} ${flags_str}\n")

  set(objects "")
  foreach(src IN LISTS sources)
    get_filename_component(name ${src} NAME_WE)
    set(obj ${CMAKE_CURRENT_BINARY_DIR}/objects/${name}.o)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${MLA_HIP_CLANG} ${flags} ${arch_flags} -MD -MF ${obj}.d
              -c ${CMAKE_CURRENT_SOURCE_DIR}/${src} -o ${obj}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src} ${devlib_stamp}
      DEPFILE ${obj}.d
      COMMENT "HIP ${src} (${MLA_GPU_TARGETS})"
      VERBATIM)
    list(APPEND objects ${obj})
  endforeach()
  add_custom_target(mla_hip_objects DEPENDS ${objects})
  add_dependencies(mla mla_hip_objects)
  set_source_files_properties(${objects} TARGET_DIRECTORY mla PROPERTIES
                              EXTERNAL_OBJECT TRUE GENERATED TRUE)
  _mla_hip_targets_string(targets_str ${MLA_GPU_TARGETS})
  get_filename_component(libdir ${MLA_AMDHIP64_LIBRARY} DIRECTORY)
  _mla_hip_attach("${objects}" ${MLA_AMDHIP64_LIBRARY} amd "${targets_str}"
                  "-L${libdir} -lamdhip64" "")

  add_custom_target(mla_hip_isa
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/isa_report.sh ${CMAKE_CURRENT_BINARY_DIR}
            ${MLA_GPU_TARGETS}
    DEPENDS ${devlib_stamp}
    COMMENT "Device assembly and register/spill report"
    VERBATIM)
endfunction()

# --- ROCM: a ROCm 6 install, CMake's HIP language ------------------------
function(mla_hip_build_rocm sources)
  add_library(mla_hip OBJECT ${sources})
  target_include_directories(mla_hip PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})
  target_compile_options(mla_hip PRIVATE -fno-exceptions -ffp-contract=off
                                         -fno-gpu-flush-denormals-to-zero
                                         -Wall -Wextra $<$<BOOL:${MLA_WERROR}>:-Werror>)
  set_target_properties(mla_hip PROPERTIES HIP_STANDARD 17 HIP_ARCHITECTURES "${MLA_GPU_TARGETS}"
                                           HIP_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  _mla_hip_targets_string(targets_str ${MLA_GPU_TARGETS})
  _mla_hip_attach($<TARGET_OBJECTS:mla_hip> hip::host amd "${targets_str}"
                  "-L$<TARGET_FILE_DIR:hip::amdhip64> -lamdhip64" "hip CONFIG")
endfunction()

# --- NVIDIA: nvcc compiles the .hip files as CUDA --------------------------
# cuda_archs: CMAKE_CUDA_ARCHITECTURES entries ("90", "90a", "90-real").
function(mla_hip_build_nvidia sources cuda_archs)
  set_source_files_properties(${sources} PROPERTIES LANGUAGE CUDA)
  add_library(mla_hip OBJECT ${sources})
  target_include_directories(mla_hip PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})
  target_compile_options(mla_hip PRIVATE --fmad=false -ftz=false -prec-div=true -prec-sqrt=true
                                         -Xcompiler=-Wall,-Wextra
                                         $<$<BOOL:${MLA_WERROR}>:-Werror=all-warnings>)
  set_target_properties(mla_hip PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                                           CUDA_ARCHITECTURES "${cuda_archs}"
                                           CUDA_VISIBILITY_PRESET hidden
                                           VISIBILITY_INLINES_HIDDEN ON)
  set(names "")
  foreach(a IN LISTS cuda_archs)
    string(REGEX REPLACE "-(real|virtual)$" "" a "${a}")
    list(APPEND names sm_${a})
  endforeach()
  _mla_hip_targets_string(targets_str ${names})
  # nvcc's host stubs use C++ runtime pieces (guarded statics, unwinding),
  # which a C program linking libmla.a does not pull in by itself.
  _mla_hip_attach($<TARGET_OBJECTS:mla_hip> "CUDA::cudart;stdc++" nvidia "${targets_str}"
                  "-L${CUDAToolkit_LIBRARY_DIR} -lcudart -lstdc++" "CUDAToolkit")
  # CMake counts the object library's CUDA among mla's languages; mla itself
  # is C, archived and linked as C (no device link: no relocatable device code).
  set_target_properties(mla PROPERTIES LINKER_LANGUAGE C CUDA_ARCHITECTURES "${cuda_archs}")

  add_custom_target(mla_hip_isa
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/isa_report.sh --nvcc ${CMAKE_CUDA_COMPILER}
            ${CMAKE_CURRENT_BINARY_DIR} ${names}
    COMMENT "ptxas register/spill report"
    VERBATIM)
endfunction()
