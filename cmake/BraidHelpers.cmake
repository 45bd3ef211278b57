# braid_add_library(NAME SOURCES ... DEPS ...): a static layer library; include root is the
# source tree (so "core/log.h") plus include/ for public headers.
function(braid_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
endfunction()

# braid_add_test(NAME SOURCES ... DEPS ... LABELS ... TIMEOUT s [NO_GTEST_MAIN]): a GoogleTest
# binary registered as one CTest entry with a label and a timeout.
function(braid_add_test name)
  cmake_parse_arguments(A "NO_GTEST_MAIN" "TIMEOUT" "SOURCES;DEPS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  if(A_NO_GTEST_MAIN)
    target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest)
  else()
    target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest_main)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  add_test(NAME ${name} COMMAND ${name} ${A_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${A_LABELS}")
endfunction()

# braid_isolate_calibration_cache(): called at the end of every test directory. Tests probe the
# fabric on a busy machine (ctest -j runs them side by side), so their calibration cache lives in
# the build tree, never in the user's ~/.cache/braid: a probe taken under the suite's load must
# not mislead later benchmark or training jobs. A test's own BRAID_CALIBRATION_CACHE wins (it
# comes later in the list).
function(braid_isolate_calibration_cache)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_property(env TEST "${t}" PROPERTY ENVIRONMENT)
    set_property(TEST "${t}" PROPERTY ENVIRONMENT
                 "BRAID_CALIBRATION_CACHE=${CMAKE_BINARY_DIR}/test-calibration-cache" ${env})
  endforeach()
endfunction()
