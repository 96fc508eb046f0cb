# tandem_project_target(): warnings (and -Werror in CI) for a target of this project, never for
# third-party code. Never tuned to the build machine (no march=native): SIMD is chosen at run time.
# -Wshadow=local is GCC's spelling (clang, used for the fuzz build, does not know it).
function(tandem_project_target target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wshadow=local>
    $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
  if(TANDEM_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()
