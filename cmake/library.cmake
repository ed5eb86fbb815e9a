# goose as a library (issue 33): the C API of include/goose/goose.h over every library below it,
# as libgoose.so and libgoose.a, installed with a CMake package (find_package(goose CONFIG):
# goose::goose, goose::goose_static), a pkg-config file (goose.pc) and the Python package.
# Both libraries are made of the folder libraries' objects, so nothing is compiled twice.
include(GNUInstallDirs)

set(goose_lib_folders util gguf ops tokenizer model sample draft tree verify budget method
    engine capi)
set(goose_lib_objects)
foreach(folder ${goose_lib_folders})
  list(APPEND goose_lib_objects $<TARGET_OBJECTS:goose_${folder}>)
endforeach()
# What the objects need from the system (a static link must name them).
set(goose_lib_deps Threads::Threads PkgConfig::PCRE2)

add_library(goose_shared SHARED ${goose_lib_objects})
set_target_properties(goose_shared PROPERTIES OUTPUT_NAME goose VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR})
target_include_directories(goose_shared PUBLIC ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(goose_shared PRIVATE ${goose_lib_deps})
# Only goose_* is exported (src/capi/goose.map); the rest is bound inside the library.
target_link_options(goose_shared PRIVATE -Wl,--version-script=${CMAKE_SOURCE_DIR}/src/capi/goose.map
                    -Wl,--no-undefined)
set_target_properties(goose_shared PROPERTIES LINK_DEPENDS ${CMAKE_SOURCE_DIR}/src/capi/goose.map)

add_library(goose_static STATIC ${goose_lib_objects})
set_target_properties(goose_static PROPERTIES OUTPUT_NAME goose)
target_include_directories(goose_static PUBLIC ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(goose_static PUBLIC ${goose_lib_deps})

# Where things go, relative to the prefix (which `cmake --install --prefix` may change: every
# installed file finds the others by relative paths).
# The Python package: Debian's python3 reads /usr/lib/python3/dist-packages (prefix /usr);
# under other prefixes set PYTHONPATH to <prefix>/${GOOSE_PYTHON_DIR}.
set(GOOSE_PYTHON_DIR "lib/python3/dist-packages" CACHE STRING
    "where the Python package goes, relative to the install prefix")
set(goose_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/goose)
set(goose_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH goose_cmake_to_prefix /p/${goose_cmake_dir} /p)
file(RELATIVE_PATH goose_pc_to_prefix /p/${goose_pc_dir} /p)
file(RELATIVE_PATH goose_python_to_lib /p/${GOOSE_PYTHON_DIR}/goose /p/${CMAKE_INSTALL_LIBDIR})

set(goose_gen ${CMAKE_BINARY_DIR}/goose-package)
configure_file(${CMAKE_SOURCE_DIR}/cmake/goose-config.cmake.in ${goose_gen}/goose-config.cmake
               @ONLY)
include(CMakePackageConfigHelpers)
write_basic_package_version_file(${goose_gen}/goose-config-version.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
configure_file(${CMAKE_SOURCE_DIR}/cmake/goose.pc.in ${goose_gen}/goose.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/python/goose/_paths.py.in ${goose_gen}/_paths.py @ONLY)

install(TARGETS goose_shared goose_static
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/goose/goose.h DESTINATION include/goose)
install(FILES ${goose_gen}/goose-config.cmake ${goose_gen}/goose-config-version.cmake
        DESTINATION ${goose_cmake_dir})
install(FILES ${goose_gen}/goose.pc DESTINATION ${goose_pc_dir})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/goose DESTINATION ${GOOSE_PYTHON_DIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${goose_gen}/_paths.py DESTINATION ${GOOSE_PYTHON_DIR}/goose)

# The tests of the installed tree: one install into the build tree (a fixture), then a C
# consumer built against it (CMake package, static and shared, and pkg-config) and the Python
# tests with Debian's python3.
function(goose_library_tests)
  set(prefix ${CMAKE_BINARY_DIR}/test-install)
  set(tiny ${GOOSE_SHARED_DIR}/models/stories260K.gguf)
  add_test(NAME library.install
           COMMAND ${CMAKE_COMMAND} -E env --unset=DESTDIR ${CMAKE_COMMAND} --install ${CMAKE_BINARY_DIR}
                   --prefix ${prefix})
  set_tests_properties(library.install PROPERTIES FIXTURES_SETUP goose_installed)
  # Sanitized builds: the consumer is built with the same sanitizers (their runtime must come
  # first), and Python preloads them.
  set(san_flags "")
  if(GOOSE_SANITIZE)
    set(san_flags "-fsanitize=address,undefined -fno-sanitize-recover=all")
  endif()
  add_test(NAME library.consumer
           COMMAND ${CMAKE_SOURCE_DIR}/tests/consumer/run.sh ${prefix}
                   ${CMAKE_BINARY_DIR}/consumer-build ${tiny} "${san_flags}")
  add_test(NAME library.python
           COMMAND ${CMAKE_SOURCE_DIR}/tests/python/run.sh ${prefix}/${GOOSE_PYTHON_DIR}
                   $<TARGET_FILE:goose> ${tiny} "${GOOSE_SANITIZE}")
  set_tests_properties(library.consumer library.python PROPERTIES
                       FIXTURES_REQUIRED goose_installed TIMEOUT 300 SKIP_RETURN_CODE 77)
endfunction()
