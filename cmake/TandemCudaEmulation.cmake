# The host emulation of the CUDA code (kernels/cuda/emulation): every library of CUDA code is also
# built by the C++ compiler as <name>_emulated, its kernels run on host fibers, and every [cuda]
# test executable gets an <name>_emulated twin whose CTest names start with "emulated:". It needs
# no CUDA Toolkit, so the kernels' arithmetic, indexing and barriers are tested on every machine;
# the real targets still need nvcc and a device. One list of sources and libraries feeds both.
option(TANDEM_CUDA_EMULATION
       "Build the CUDA code a second time for the host emulation and run its [cuda] tests there" ON)

# tandem_cuda_library(NAME SOURCES ... [LIBS ...] [CUDA_LIBS ...]): NAME with nvcc (when
# TANDEM_CUDA_ENABLED; links LIBS, CUDA_LIBS and the CUDA runtime) and NAME_emulated (when
# TANDEM_CUDA_EMULATION; links LIBS, the CUDA_LIBS' _emulated twins and the emulation). A .cu
# source reaches the C++ compiler through a generated one-line .cpp that includes it (a source
# file has one language per directory).
function(tandem_cuda_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;CUDA_LIBS" ${ARGN})
  if(TANDEM_CUDA_ENABLED)
    add_library(${name} STATIC ${ARG_SOURCES})
    target_link_libraries(${name} PUBLIC ${ARG_LIBS} ${ARG_CUDA_LIBS} CUDA::cudart)
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
    tandem_project_target(${name})
  endif()
  if(TANDEM_CUDA_EMULATION)
    set(emulated_sources)
    foreach(src IN LISTS ARG_SOURCES)
      if(src MATCHES "\\.cu$")
        get_filename_component(abs ${src} ABSOLUTE)
        get_filename_component(stem ${src} NAME_WE)
        set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/emulated/${stem}.cu.cpp)
        file(CONFIGURE OUTPUT ${wrapper}
             CONTENT "// Generated: ${src} for the CUDA emulation.\n#include \"${abs}\"\n")
        list(APPEND emulated_sources ${wrapper})
      else()
        list(APPEND emulated_sources ${src})
      endif()
    endforeach()
    list(TRANSFORM ARG_CUDA_LIBS APPEND _emulated OUTPUT_VARIABLE emulated_cuda_libs)
    add_library(${name}_emulated STATIC ${emulated_sources})
    target_link_libraries(${name}_emulated PUBLIC ${ARG_LIBS} ${emulated_cuda_libs}
                                                  tandem_cuda_emulation)
    target_include_directories(${name}_emulated PUBLIC ${PROJECT_SOURCE_DIR})
    tandem_project_target(${name}_emulated)
  endif()
endfunction()

# tandem_add_cuda_test(NAME SOURCES ... [LIBS ...] [CUDA_LIBS ...]): the [cuda] test executable
# NAME (with nvcc) and NAME_emulated (its cases named "emulated:<case>" in CTest), as above.
function(tandem_add_cuda_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;CUDA_LIBS" ${ARGN})
  if(TANDEM_CUDA_ENABLED)
    tandem_add_test(${name} SOURCES ${ARG_SOURCES} LIBS ${ARG_LIBS} ${ARG_CUDA_LIBS})
  endif()
  if(TANDEM_CUDA_EMULATION)
    list(TRANSFORM ARG_CUDA_LIBS APPEND _emulated OUTPUT_VARIABLE emulated_cuda_libs)
    tandem_add_test(${name}_emulated SOURCES ${ARG_SOURCES} LIBS ${ARG_LIBS} ${emulated_cuda_libs}
                    PREFIX "emulated:")
  endif()
endfunction()
