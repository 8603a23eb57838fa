# Warnings and sanitizers for the project's own C/C++ targets.
# RoPE and the format conversions are bit-defined (MLA.md sections 3 and 5):
# no fused multiply-add may be formed behind the code's back. Kernels that
# want FMA (GEMMs) ask for it explicitly with intrinsics or fmaf().
add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-ffp-contract=off>)

function(mla_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wshadow -Wstrict-aliasing>
    $<$<AND:$<BOOL:${MLA_WERROR}>,$<COMPILE_LANGUAGE:C,CXX>>:-Werror>)
endfunction()

if(MLA_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=all>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=address,undefined)
endif()
