# How ntblend's parts are built for installation and installed (docs/install.md). This file
# owns the three functions every part goes through:
#
#   ntblend_library(TARGET MAP FILE HEADERS H... [HEADER_BASE DIR] [LIBRARY_DESTINATION DIR]
#                   [ALSO_IN DIR...] [PKGCONFIG "DESCRIPTION"] [PKGCONFIG_REQUIRES NAME...])
#       a public shared library: the project's version and soname, the export list MAP (a GNU
#       ld version script; the library is compiled with -fvisibility=hidden and its headers
#       mark the API visible), ntblend::TARGET for find_package(ntblend) and for the build
#       tree, HEADERS (paths relative to HEADER_BASE, default the project's include/, else to
#       the build's include/ for generated ones) installed under include/ with their
#       subdirectories, a pkg-config file TARGET.pc when PKGCONFIG is given, and the library
#       added to tests/system/test_exports.sh's list. ALSO_IN installs the library in more
#       directories as well (a layout other programs expect, e.g. Dolphin's lib64/); its run
#       path finds the other libraries from each of them.
#   ntblend_install_programs(bin|helpers|pkglib TARGET...)
#       programs a user runs (bin/) or that ntblend runs for the user (the helpers' directory,
#       libexec/ntblend/: agents, relays, tools started with `ntblend run`), or modules others
#       load (lib/ntblend/: the fio engine), each with a run path to the installed libraries
#       that does not depend on the prefix.
#   ntblend_install_configured(TEMPLATE FILE DESTINATION DIR RENAME NAME [PROGRAM]
#                              [VARS NAME=VALUE...])
#       a file configured at install time, so that the paths in it are those of the prefix it
#       is installed into (cmake --install --prefix P). VALUEs may name the installed
#       directories as @NTBLEND_FULL_BINDIR@, ..._LIBDIR@, ..._INCLUDEDIR@, ..._HELPERDIR@,
#       ..._PKGLIBDIR@, ..._DATADIR@ and @NTBLEND_PREFIX@.
#
# ntblend_install_finish(), called once at the end of the top-level CMakeLists, writes the
# CMake package (ntblendConfig.cmake) and the list of libraries for the exports test.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# One version, from project(): `ntblend --version`, the libraries' file names and sonames, the
# pkg-config files, the CMake package and the Debian package. While the major version is 0,
# every minor version may change the ABI, so the soname carries both (libntblend.so.0.1).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(NTBLEND_SOVERSION "0.${PROJECT_VERSION_MINOR}")
else()
  set(NTBLEND_SOVERSION "${PROJECT_VERSION_MAJOR}")
endif()

# Where things go, relative to the prefix. The helpers' directory holds the programs that
# `ntblend` starts itself (the host agent, oshrelay) and the tools users run
# as processes of an emulated host (`ntblend run --host H -- ntb_perf`), which finds them
# there; the package library directory holds the fio engine.
set(NTBLEND_HELPERDIR "${CMAKE_INSTALL_LIBEXECDIR}/ntblend")
set(NTBLEND_PKGLIBDIR "${CMAKE_INSTALL_LIBDIR}/ntblend")
set(NTBLEND_PKGDATADIR "${CMAKE_INSTALL_DATADIR}/ntblend")
set(NTBLEND_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ntblend")

# The same directories from one another, for programs that find their siblings from their
# own location (/proc/self/exe) wherever the tree was installed. Absolute directories given
# to GNUInstallDirs are taken relative to the configured prefix.
function(_ntblend_full out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
function(_ntblend_relative out from to)
  _ntblend_full(f "${from}")
  _ntblend_full(t "${to}")
  file(RELATIVE_PATH r "${f}" "${t}")
  if(r STREQUAL "")
    set(r ".")
  endif()
  set(${out} "${r}" PARENT_SCOPE)
endfunction()
_ntblend_relative(NTBLEND_REL_BIN_TO_HELPERS "${CMAKE_INSTALL_BINDIR}" "${NTBLEND_HELPERDIR}")
_ntblend_relative(NTBLEND_REL_BIN_TO_PKGLIB "${CMAKE_INSTALL_BINDIR}" "${NTBLEND_PKGLIBDIR}")
_ntblend_relative(NTBLEND_REL_BIN_TO_DATA "${CMAKE_INSTALL_BINDIR}" "${NTBLEND_PKGDATADIR}")
_ntblend_relative(NTBLEND_REL_HELPERS_TO_BIN "${NTBLEND_HELPERDIR}" "${CMAKE_INSTALL_BINDIR}")
configure_file("${CMAKE_CURRENT_LIST_DIR}/install_dirs.h.in"
               "${PROJECT_BINARY_DIR}/gen/install_dirs.h" @ONLY)
_ntblend_relative(_rel_bin_lib "${CMAKE_INSTALL_BINDIR}" "${CMAKE_INSTALL_LIBDIR}")
_ntblend_relative(_rel_helpers_lib "${NTBLEND_HELPERDIR}" "${CMAKE_INSTALL_LIBDIR}")
_ntblend_relative(_rel_pkglib_lib "${NTBLEND_PKGLIBDIR}" "${CMAKE_INSTALL_LIBDIR}")

# The installed names of the OpenSHMEM wrappers are oshcc, oshc++, oshCC, oshcxx and oshrun
# followed by this suffix. Empty by default; the Debian package uses ".ntblend", as Debian's
# MPI packages name their wrappers (mpicc.openmpi), because Open MPI's package has the plain
# names (its postinst gives the plain names to ntblend's where no package has them).
set(NTBLEND_OSH_SUFFIX "" CACHE STRING
    "Suffix of the installed OpenSHMEM wrappers (oshcc, oshrun, ...), e.g. .ntblend")

# What a program built against a sanitized ntblend needs too (a sanitized library cannot be
# loaded by a program without the sanitizer runtime): passed on by oshcc, the pkg-config
# files and the CMake targets of such a build, and empty otherwise.
set(NTBLEND_CONSUMER_FLAGS "")
if(NTBLEND_SANITIZE)
  set(NTBLEND_CONSUMER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer)
endif()
string(REPLACE ";" " " NTBLEND_CONSUMER_FLAGS_STRING "${NTBLEND_CONSUMER_FLAGS}")

function(ntblend_library target)
  cmake_parse_arguments(PARSE_ARGV 1 L "" "MAP;HEADER_BASE;LIBRARY_DESTINATION;PKGCONFIG"
                        "HEADERS;PKGCONFIG_REQUIRES;ALSO_IN")
  if(NOT L_MAP)
    message(FATAL_ERROR "ntblend_library(${target}): give its export list with MAP")
  endif()
  if(NOT L_HEADER_BASE)
    set(L_HEADER_BASE "${PROJECT_SOURCE_DIR}/include")
  endif()
  if(NOT L_LIBRARY_DESTINATION)
    set(L_LIBRARY_DESTINATION "${CMAKE_INSTALL_LIBDIR}")
  endif()
  get_filename_component(map "${L_MAP}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  # The other libraries are in the libdir: found from every directory this one goes to.
  set(rpath "")
  foreach(d "${L_LIBRARY_DESTINATION}" ${L_ALSO_IN})
    _ntblend_relative(r "${d}" "${CMAKE_INSTALL_LIBDIR}")
    if(r STREQUAL ".")
      list(APPEND rpath "$ORIGIN")
    else()
      list(APPEND rpath "$ORIGIN/${r}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES rpath)
  set_target_properties(${target} PROPERTIES
    VERSION "${PROJECT_VERSION}" SOVERSION "${NTBLEND_SOVERSION}"
    C_VISIBILITY_PRESET hidden LINK_DEPENDS "${map}"
    INSTALL_RPATH "${rpath}")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  target_include_directories(${target} PUBLIC
    "$<BUILD_INTERFACE:${L_HEADER_BASE};${PROJECT_BINARY_DIR}/include>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  if(NTBLEND_CONSUMER_FLAGS)
    target_compile_options(${target} INTERFACE "$<INSTALL_INTERFACE:${NTBLEND_CONSUMER_FLAGS}>")
    target_link_options(${target} INTERFACE "$<INSTALL_INTERFACE:${NTBLEND_CONSUMER_FLAGS}>")
  endif()
  add_library(ntblend::${target} ALIAS ${target})
  install(TARGETS ${target} EXPORT ntblendTargets LIBRARY DESTINATION "${L_LIBRARY_DESTINATION}")
  foreach(d ${L_ALSO_IN})
    install(TARGETS ${target} LIBRARY DESTINATION "${d}")
  endforeach()

  set(headers "")
  foreach(h ${L_HEADERS})
    if(EXISTS "${L_HEADER_BASE}/${h}")
      set(file "${L_HEADER_BASE}/${h}")
    else()
      # Generated at build time (pshmem.h, ntblend/version.h).
      set(file "${PROJECT_BINARY_DIR}/include/${h}")
    endif()
    get_filename_component(sub "${h}" DIRECTORY)
    install(FILES "${file}" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/${sub}")
    list(APPEND headers "${file}")
  endforeach()
  # For tests/system/test_exports.sh: the library and the headers that declare its API.
  set_property(TARGET ${target} PROPERTY NTBLEND_API_HEADERS "${headers}")
  set_property(TARGET ${target} PROPERTY NTBLEND_API_INCLUDES
               "${L_HEADER_BASE};${PROJECT_SOURCE_DIR}/include;${PROJECT_BINARY_DIR}/include")
  set_property(GLOBAL APPEND PROPERTY NTBLEND_LIBRARIES ${target})

  if(L_PKGCONFIG)
    string(REPLACE ";" " " requires "${L_PKGCONFIG_REQUIRES}")
    # libdir and includedir as ${prefix}/..., as pkg-config files usually say.
    set(pc_sep "")
    if(NTBLEND_CONSUMER_FLAGS_STRING)
      set(pc_sep " ")
    endif()
    foreach(d libdir:L_LIBRARY_DESTINATION includedir:CMAKE_INSTALL_INCLUDEDIR)
      string(REGEX REPLACE ":.*" "" key "${d}")
      string(REGEX REPLACE ".*:" "" var "${d}")
      if(IS_ABSOLUTE "${${var}}")
        set(pc_${key} "${${var}}")
      else()
        set(pc_${key} "\${prefix}/${${var}}")
      endif()
    endforeach()
    ntblend_install_configured(TEMPLATE "${PROJECT_SOURCE_DIR}/cmake/library.pc.in"
      DESTINATION "${L_LIBRARY_DESTINATION}/pkgconfig" RENAME "${target}.pc"
      VARS "PC_NAME=${target}" "PC_DESCRIPTION=${L_PKGCONFIG}" "PC_REQUIRES=${requires}"
           "PC_VERSION=${PROJECT_VERSION}"
           "PC_LIBDIR=${pc_libdir}" "PC_INCLUDEDIR=${pc_includedir}"
           "PC_LIBS=${NTBLEND_CONSUMER_FLAGS_STRING}${pc_sep}-L\${libdir} -l${target}"
           "PC_CFLAGS=${NTBLEND_CONSUMER_FLAGS_STRING}${pc_sep}-I\${includedir}")
  endif()
endfunction()

function(ntblend_install_programs where)
  if(where STREQUAL "bin")
    set(dest "${CMAKE_INSTALL_BINDIR}")
    set(rpath "$ORIGIN/${_rel_bin_lib}")
  elseif(where STREQUAL "helpers")
    set(dest "${NTBLEND_HELPERDIR}")
    set(rpath "$ORIGIN/${_rel_helpers_lib}")
  elseif(where STREQUAL "pkglib")
    set(dest "${NTBLEND_PKGLIBDIR}")
    set(rpath "$ORIGIN/${_rel_pkglib_lib}")
  else()
    message(FATAL_ERROR "ntblend_install_programs: bin, helpers or pkglib, not '${where}'")
  endif()
  foreach(t ${ARGN})
    set_target_properties(${t} PROPERTIES INSTALL_RPATH "${rpath}")
    install(TARGETS ${t} RUNTIME DESTINATION "${dest}" LIBRARY DESTINATION "${dest}")
  endforeach()
endfunction()

function(ntblend_install_configured)
  cmake_parse_arguments(PARSE_ARGV 0 C "PROGRAM" "TEMPLATE;DESTINATION;RENAME" "VARS")
  # The directories the install script fills in, as given to GNUInstallDirs.
  # The VARS hold @...@ for the install script to fill in: evaluated as CMake 3.1 on does
  # (CMP0053), not as the default policies of cmake_install.cmake would.
  string(CONCAT code "cmake_policy(PUSH)\ncmake_policy(SET CMP0053 NEW)\n"
           "set(ntblend_template \"${C_TEMPLATE}\")\n"
           "set(ntblend_destination \"${C_DESTINATION}\")\n"
           "set(ntblend_rename \"${C_RENAME}\")\n"
           "set(ntblend_program \"${C_PROGRAM}\")\n"
           "set(ntblend_scratch \"${PROJECT_BINARY_DIR}/install-configured\")\n"
           "set(ntblend_dirs BINDIR=${CMAKE_INSTALL_BINDIR} LIBDIR=${CMAKE_INSTALL_LIBDIR} "
           "INCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR} HELPERDIR=${NTBLEND_HELPERDIR} "
           "PKGLIBDIR=${NTBLEND_PKGLIBDIR} DATADIR=${NTBLEND_PKGDATADIR})\n"
           "set(ntblend_vars)\n")
  foreach(v ${C_VARS})
    string(REPLACE "\\" "\\\\" v "${v}")
    string(REPLACE "\"" "\\\"" v "${v}")
    string(REPLACE "$" "\\$" v "${v}")
    string(APPEND code "list(APPEND ntblend_vars \"${v}\")\n")
  endforeach()
  string(APPEND code "include(\"${PROJECT_SOURCE_DIR}/cmake/install-configure.cmake\")\n"
                     "cmake_policy(POP)\n")
  install(CODE "${code}")
endfunction()

function(ntblend_install_finish)
  # find_package(ntblend): the libraries as ntblend::NAME, relocatable with the prefix.
  install(EXPORT ntblendTargets NAMESPACE ntblend:: DESTINATION "${NTBLEND_CMAKEDIR}")
  configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/ntblendConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/cmake/ntblendConfig.cmake" INSTALL_DESTINATION "${NTBLEND_CMAKEDIR}")
  # 0.x: a minor version may break the API, so only the same minor version is compatible.
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(compat SameMinorVersion)
  else()
    set(compat SameMajorVersion)
  endif()
  write_basic_package_version_file("${PROJECT_BINARY_DIR}/cmake/ntblendConfigVersion.cmake"
    COMPATIBILITY ${compat})
  install(FILES "${PROJECT_BINARY_DIR}/cmake/ntblendConfig.cmake"
                "${PROJECT_BINARY_DIR}/cmake/ntblendConfigVersion.cmake"
          DESTINATION "${NTBLEND_CMAKEDIR}")

  # tests/system/test_exports.sh: one line per library: its file, its API headers, and the
  # directories those headers include from.
  get_property(libs GLOBAL PROPERTY NTBLEND_LIBRARIES)
  set(lines "")
  foreach(l ${libs})
    get_property(h TARGET ${l} PROPERTY NTBLEND_API_HEADERS)
    get_property(i TARGET ${l} PROPERTY NTBLEND_API_INCLUDES)
    list(REMOVE_DUPLICATES i)
    string(REPLACE ";" " " h "${h}")
    string(REPLACE ";" " " i "${i}")
    string(APPEND lines "$<TARGET_FILE:${l}>\t${h}\t${i}\n")
  endforeach()
  file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/exports/libraries.tsv" CONTENT "${lines}")
endfunction()
