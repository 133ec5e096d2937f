# What differs between the LibTorch builds nmt supports, detected rather than passed by hand:
# Debian's CPU LibTorch 1.13 (CI) and a current CUDA LibTorch such as the one inside pip's torch
# (Torch_DIR from `python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'`).
#
# Sets NMT_TORCH_CUDA (the build has CUDA), NMT_LIBSTDCXX_FIRST (link flags) and
# NMT_FMT_INCLUDE_DIR (an include directory to put first, or empty).

# CUDA: TorchConfig sets TORCH_CUDA_LIBRARIES only for CUDA builds, which also define torch_cuda.
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(NMT_TORCH_CUDA ON)
else()
  set(NMT_TORCH_CUDA OFF)
endif()

# libstdc++ first. Some CUDA LibTorch installations (pip's torch with its NVIDIA libraries) load
# a library that exports libstdc++'s own symbols (std::cout among thousands) ahead of libstdc++;
# those copies then win symbol lookup, the copy-relocation guard (src/text/spm.cpp) sees two
# standard streams, and the tests crash. Putting libstdc++.so.6 first in every executable's and
# shared library's needed list makes its definitions the ones everybody binds to. Detected by
# running a probe linked like nmt (cmake/libstdcxx_probe.cpp); Debian's LibTorch needs nothing.
set(NMT_LINK_LIBSTDCXX_FIRST AUTO CACHE STRING "Link libstdc++ first: AUTO (detect), ON, OFF")
set(NMT_LIBSTDCXX_FIRST "")
set(_nmt_exports_std ${NMT_LINK_LIBSTDCXX_FIRST})
if(NMT_LINK_LIBSTDCXX_FIRST STREQUAL "AUTO")
  # LibTorch's libraries by path, in nmt's order and all kept (LibTorch's imported targets may
  # name dependencies, such as protobuf, that a try_run project cannot resolve).
  get_filename_component(_nmt_torch_lib_dir "${TORCH_LIBRARY}" DIRECTORY)
  set(_nmt_probe_libs "-Wl,--no-as-needed")
  foreach(_name torch torch_cpu torch_cuda c10 c10_cuda)
    find_library(NMT_PROBE_LIB_${_name} ${_name} PATHS "${_nmt_torch_lib_dir}" NO_DEFAULT_PATH)
    if(NMT_PROBE_LIB_${_name})
      list(APPEND _nmt_probe_libs "${NMT_PROBE_LIB_${_name}}")
    endif()
  endforeach()
  try_run(_nmt_probe_run _nmt_probe_compiled ${CMAKE_BINARY_DIR}/nmt-libstdcxx-probe
          ${CMAKE_CURRENT_LIST_DIR}/libstdcxx_probe.cpp
          CMAKE_FLAGS -DCMAKE_POSITION_INDEPENDENT_CODE=OFF
          "-DCMAKE_BUILD_RPATH=${_nmt_torch_lib_dir}"
          COMPILE_DEFINITIONS -fPIC
          LINK_LIBRARIES ${_nmt_probe_libs} ${CMAKE_DL_LIBS}
          CXX_STANDARD 17
          COMPILE_OUTPUT_VARIABLE _nmt_probe_log
          RUN_OUTPUT_VARIABLE _nmt_probe_output)
  if(NOT _nmt_probe_compiled)
    message(WARNING "nmt: the libstdc++ probe did not build; not linking libstdc++ first\n"
                    "${_nmt_probe_log}")
    set(_nmt_exports_std OFF)
  elseif(NOT _nmt_probe_run MATCHES "^[01]$")
    message(WARNING "nmt: the libstdc++ probe did not run (${_nmt_probe_run}); not linking "
                    "libstdc++ first\n${_nmt_probe_output}")
    set(_nmt_exports_std OFF)
  elseif(_nmt_probe_run EQUAL 1)
    message(STATUS "nmt: a LibTorch dependency exports libstdc++'s std::cout: linking "
                   "libstdc++ first")
    set(_nmt_exports_std ON)
  else()
    message(STATUS "nmt: executables see libstdc++'s own std::cout (probe exit ${_nmt_probe_run})")
    set(_nmt_exports_std OFF)
  endif()
endif()
if(_nmt_exports_std)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
                  OUTPUT_VARIABLE _libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(_libstdcxx "${_libstdcxx}" REALPATH)
  set(NMT_LIBSTDCXX_FIRST "-Wl,--push-state,--no-as-needed ${_libstdcxx} -Wl,--pop-state")
  string(APPEND CMAKE_EXE_LINKER_FLAGS " ${NMT_LIBSTDCXX_FIRST}")
  string(APPEND CMAKE_SHARED_LINKER_FLAGS " ${NMT_LIBSTDCXX_FIRST}")
endif()

# fmt. spdlog is compiled against the fmt it was packaged with (Debian's spdlog 1.10: fmt 9), and
# its headers must see that fmt. A LibTorch that ships its own fmt headers (pip's torch: fmt 12)
# puts them on the include path as a system directory, ahead of /usr/include, so spdlog would
# pick them up. A directory holding only a link to spdlog's fmt, given with -I, comes first.
set(NMT_FMT_INCLUDE_DIR "")
if(TARGET fmt::fmt)
  get_target_property(_fmt_dirs fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  set(_spdlog_fmt "")
  foreach(_dir ${_fmt_dirs})
    if(EXISTS "${_dir}/fmt/core.h")
      get_filename_component(_spdlog_fmt "${_dir}/fmt" REALPATH)
      break()
    endif()
  endforeach()
  foreach(_dir ${TORCH_INCLUDE_DIRS})
    if(NOT EXISTS "${_dir}/fmt/core.h" OR NOT _spdlog_fmt)
      continue()
    endif()
    get_filename_component(_torch_fmt "${_dir}/fmt" REALPATH)
    if(NOT _torch_fmt STREQUAL _spdlog_fmt)
      set(NMT_FMT_INCLUDE_DIR "${CMAKE_BINARY_DIR}/nmt-fmt-include")
      file(MAKE_DIRECTORY "${NMT_FMT_INCLUDE_DIR}")
      file(CREATE_LINK "${_spdlog_fmt}" "${NMT_FMT_INCLUDE_DIR}/fmt" SYMBOLIC)
      message(STATUS "nmt: LibTorch ships its own fmt headers (${_torch_fmt}); spdlog's "
                     "(${_spdlog_fmt}) come first")
      break()
    endif()
  endforeach()
endif()

message(STATUS "nmt: LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX}, CUDA ${NMT_TORCH_CUDA}")
