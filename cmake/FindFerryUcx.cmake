# UCX (UCP) for the inter-node transport. Looked for, in order: FERRY_UCX_ROOT,
# ./.deps/ucx (the tree scripts/setup.sh unpacks from the libucx-cu13 wheel for
# machines without pip), then the default paths. Needs UCX >= 1.14 (endpoint
# transport queries). Sets FERRY_HAVE_UCX and the imported target ferry_ucx.
set(FERRY_HAVE_UCX OFF)
if(NOT FERRY_WITH_UCX STREQUAL "OFF")
  set(_ferry_ucx_hints ${FERRY_UCX_ROOT} $ENV{FERRY_UCX_ROOT} ${PROJECT_SOURCE_DIR}/.deps/ucx)
  find_path(FERRY_UCX_INCLUDE_DIR ucp/api/ucp.h HINTS ${_ferry_ucx_hints} PATH_SUFFIXES include)
  # The libraries of the same UCX as the headers: a library found elsewhere (the
  # system's, cached before .deps/ucx was unpacked, say) is another version, and
  # the process would load an older libucp than the API it was compiled against.
  if(FERRY_UCX_INCLUDE_DIR)
    get_filename_component(_ferry_ucx_prefix ${FERRY_UCX_INCLUDE_DIR} DIRECTORY)
    if(EXISTS ${_ferry_ucx_prefix}/lib/libucp.so.0 OR EXISTS ${_ferry_ucx_prefix}/lib/libucp.so)
      foreach(_ferry_var FERRY_UCP_LIBRARY FERRY_UCS_LIBRARY)
        if(${_ferry_var})
          string(FIND "${${_ferry_var}}" "${_ferry_ucx_prefix}/" _ferry_at)
          if(NOT _ferry_at EQUAL 0)
            message(STATUS "ferry: ${_ferry_var} ${${_ferry_var}} is not the UCX of ${FERRY_UCX_INCLUDE_DIR}: searching again")
            unset(${_ferry_var} CACHE)
          endif()
        endif()
      endforeach()
      find_library(FERRY_UCP_LIBRARY NAMES ucp libucp.so.0 NAMES_PER_DIR PATHS ${_ferry_ucx_prefix}/lib NO_DEFAULT_PATH)
      find_library(FERRY_UCS_LIBRARY NAMES ucs libucs.so.0 NAMES_PER_DIR PATHS ${_ferry_ucx_prefix}/lib NO_DEFAULT_PATH)
    endif()
  endif()
  find_library(FERRY_UCP_LIBRARY NAMES ucp libucp.so.0 NAMES_PER_DIR HINTS ${_ferry_ucx_hints} PATH_SUFFIXES lib lib64)
  find_library(FERRY_UCS_LIBRARY NAMES ucs libucs.so.0 NAMES_PER_DIR HINTS ${_ferry_ucx_hints} PATH_SUFFIXES lib lib64)
  if(FERRY_UCX_INCLUDE_DIR AND FERRY_UCP_LIBRARY AND FERRY_UCS_LIBRARY)
    file(STRINGS ${FERRY_UCX_INCLUDE_DIR}/ucp/api/ucp_version.h _ferry_ucx_major REGEX "define UCP_API_MAJOR")
    file(STRINGS ${FERRY_UCX_INCLUDE_DIR}/ucp/api/ucp_version.h _ferry_ucx_minor REGEX "define UCP_API_MINOR")
    string(REGEX MATCH "[0-9]+" _ferry_ucx_major "${_ferry_ucx_major}")
    string(REGEX MATCH "[0-9]+" _ferry_ucx_minor "${_ferry_ucx_minor}")
    set(FERRY_UCX_VERSION "${_ferry_ucx_major}.${_ferry_ucx_minor}")
    if(FERRY_UCX_VERSION VERSION_LESS 1.14)
      message(WARNING "ferry: UCX ${FERRY_UCX_VERSION} at ${FERRY_UCX_INCLUDE_DIR} is older than 1.14: "
                      "building without the inter-node transport (set FERRY_UCX_ROOT to a newer UCX)")
    else()
      set(FERRY_HAVE_UCX ON)
      add_library(ferry_ucx INTERFACE IMPORTED)
      set_target_properties(ferry_ucx PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES ${FERRY_UCX_INCLUDE_DIR}
        INTERFACE_LINK_LIBRARIES "${FERRY_UCP_LIBRARY};${FERRY_UCS_LIBRARY}")
      get_filename_component(FERRY_UCX_LIBRARY_DIR ${FERRY_UCP_LIBRARY} DIRECTORY)
      message(STATUS "ferry: inter-node transport: UCX ${FERRY_UCX_VERSION} (${FERRY_UCP_LIBRARY})")
    endif()
  endif()
endif()
if(NOT FERRY_HAVE_UCX)
  if(FERRY_WITH_UCX STREQUAL "ON")
    message(FATAL_ERROR "ferry: FERRY_WITH_UCX=ON but no UCX >= 1.14 was found: set FERRY_UCX_ROOT "
                        "(pip install libucx-cu13 ships one; scripts/setup.sh finds it)")
  endif()
  message(STATUS "ferry: no UCX: ranks in several nodes are refused (set FERRY_UCX_ROOT to enable)")
endif()
