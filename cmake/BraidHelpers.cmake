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
