# Optional dependencies: each BRAID_WITH_X is AUTO by default (on when found), and can be forced
# ON (an error when missing) or OFF.
include(CheckLanguage)

macro(braid_option name help)
  set(${name} AUTO CACHE STRING "${help} (AUTO|ON|OFF)")
endmacro()
braid_option(BRAID_WITH_CUDA "Build CUDA kernels and GPU tests")
braid_option(BRAID_WITH_NCCL "Build the NCCL device-memory backend")
braid_option(BRAID_WITH_UCX "Build the UCX transport")
braid_option(BRAID_WITH_MPI "Build the MPI bootstrap and MPI comparison")
braid_option(BRAID_WITH_HWLOC "Build the hwloc topology detector")

# braid_resolve(VAR FOUND): turns AUTO into ON/OFF, fails when ON but not found.
macro(braid_resolve var found)
  if(${var} STREQUAL "AUTO")
    if(${found})
      set(${var} ON)
    else()
      set(${var} OFF)
    endif()
  elseif(${var})
    if(NOT ${found})
      message(FATAL_ERROR "${var}=ON but the dependency was not found")
    endif()
    set(${var} ON)
  else()
    set(${var} OFF)
  endif()
endmacro()

if(NOT BRAID_WITH_MPI STREQUAL "OFF")
  # Debian installs MPICH and Open MPI side by side; braid's MPI launch support is built against
  # MPICH unless MPI_C_COMPILER says otherwise (Open MPI is used only by the comparison baseline).
  if(NOT MPI_C_COMPILER AND EXISTS /usr/bin/mpicc.mpich)
    set(MPI_C_COMPILER /usr/bin/mpicc.mpich)
  endif()
  find_package(MPI COMPONENTS C QUIET)
endif()
braid_resolve(BRAID_WITH_MPI MPI_C_FOUND)

find_package(PkgConfig QUIET)
set(braid_ucx_found FALSE)
if(NOT BRAID_WITH_UCX STREQUAL "OFF" AND PkgConfig_FOUND)
  pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
  set(braid_ucx_found ${UCX_FOUND})
endif()
braid_resolve(BRAID_WITH_UCX braid_ucx_found)

set(braid_hwloc_found FALSE)
if(NOT BRAID_WITH_HWLOC STREQUAL "OFF" AND PkgConfig_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
  set(braid_hwloc_found ${HWLOC_FOUND})
endif()
braid_resolve(BRAID_WITH_HWLOC braid_hwloc_found)

set(braid_cuda_found FALSE)
if(NOT BRAID_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    set(braid_cuda_found ${CUDAToolkit_FOUND})
  endif()
endif()
braid_resolve(BRAID_WITH_CUDA braid_cuda_found)

set(braid_nccl_found FALSE)
if(NOT BRAID_WITH_NCCL STREQUAL "OFF" AND BRAID_WITH_CUDA)
  # NCCL_HOME (environment) first: e.g. the nvidia-nccl wheel, which has no unversioned libnccl.so.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS}
            /usr/local/cuda/include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR}
               /usr/local/cuda/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(braid_nccl_found TRUE)
  endif()
endif()
braid_resolve(BRAID_WITH_NCCL braid_nccl_found)

# Python module (python/): pybind11 and the development files of one interpreter, by default
# Debian's /usr/bin/python3 (the one with python3-torch); -DPython3_EXECUTABLE=... picks another.
# pybind11 comes from its CMake package (pybind11-dev), from the interpreter's pybind11 package,
# or, as headers only, from BRAID_PYBIND11_INCLUDE_DIR (e.g. the copy inside torch/include).
braid_option(BRAID_WITH_PYTHON "Build the Python module braid._braid (pybind11)")
set(braid_python_found FALSE)
if(NOT BRAID_WITH_PYTHON STREQUAL "OFF")
  if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  if(Python3_FOUND)
    find_package(pybind11 CONFIG QUIET)
    if(NOT pybind11_FOUND)
      execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pybind11; print(pybind11.get_cmake_dir())"
                      OUTPUT_VARIABLE braid_pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                      RESULT_VARIABLE braid_pybind11_rc ERROR_QUIET)
      if(braid_pybind11_rc EQUAL 0 AND braid_pybind11_dir)
        find_package(pybind11 CONFIG QUIET HINTS ${braid_pybind11_dir})
      endif()
    endif()
    if(pybind11_FOUND)
      set(braid_python_found TRUE)
    elseif(BRAID_PYBIND11_INCLUDE_DIR AND EXISTS ${BRAID_PYBIND11_INCLUDE_DIR}/pybind11/pybind11.h)
      set(braid_python_found TRUE)
    endif()
  endif()
endif()
braid_resolve(BRAID_WITH_PYTHON braid_python_found)
