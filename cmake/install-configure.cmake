# Run by `cmake --install` for each ntblend_install_configured() file (cmake/NtblendInstall.cmake):
# configures the template with the directories of the prefix being installed into, then
# installs the result (honouring DESTDIR, and listed in install_manifest.txt).
# In: ntblend_template, ntblend_destination, ntblend_rename, ntblend_program, ntblend_scratch,
# ntblend_dirs (KEY=relative or absolute directory), ntblend_vars (NAME=VALUE).
set(NTBLEND_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(d ${ntblend_dirs})
  string(REGEX REPLACE "=.*" "" key "${d}")
  string(REGEX REPLACE "^[^=]*=" "" dir "${d}")
  if(IS_ABSOLUTE "${dir}")
    set(NTBLEND_FULL_${key} "${dir}")
  else()
    set(NTBLEND_FULL_${key} "${CMAKE_INSTALL_PREFIX}/${dir}")
  endif()
endforeach()
foreach(v ${ntblend_vars})
  string(REGEX REPLACE "=.*" "" name "${v}")
  string(REGEX REPLACE "^[^=]*=" "" value "${v}")
  string(CONFIGURE "${value}" value @ONLY)
  set(${name} "${value}")
endforeach()
if(IS_ABSOLUTE "${ntblend_destination}")
  set(dest "${ntblend_destination}")
else()
  set(dest "${CMAKE_INSTALL_PREFIX}/${ntblend_destination}")
endif()
set(out "${ntblend_scratch}/${ntblend_destination}/${ntblend_rename}")
configure_file("${ntblend_template}" "${out}" @ONLY)
if(ntblend_program)
  file(INSTALL "${out}" DESTINATION "${dest}" FILE_PERMISSIONS OWNER_READ OWNER_WRITE
       OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
else()
  file(INSTALL "${out}" DESTINATION "${dest}")
endif()
