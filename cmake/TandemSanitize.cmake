# TANDEM_SANITIZE: the sanitizers for every project target (address, undefined, thread, or
# address,undefined together).
if(TANDEM_SANITIZE)
  if(NOT TANDEM_SANITIZE MATCHES "^(address|undefined|thread|address,undefined)$")
    message(FATAL_ERROR "TANDEM_SANITIZE='${TANDEM_SANITIZE}': expected address, undefined, "
                        "thread or address,undefined")
  endif()
  set(_tandem_san_flags -fsanitize=${TANDEM_SANITIZE} -fno-omit-frame-pointer)
  if(TANDEM_SANITIZE MATCHES "undefined")
    list(APPEND _tandem_san_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_tandem_san_flags}>")
  add_link_options(${_tandem_san_flags})
endif()
