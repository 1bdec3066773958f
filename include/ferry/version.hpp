// What this library was built with, against what the process loaded.
#pragma once

#include <string>

namespace ferry {

// The UCX ferry was built against (its headers) and the one this process
// loaded (ucp_get_version of the libucp the library resolved at run time).
struct UcxVersions {
  bool built_with_ucx = false;
  int built_major = 0, built_minor = 0;                        // UCP_API_MAJOR / UCP_API_MINOR
  int loaded_major = 0, loaded_minor = 0, loaded_release = 0;  // 0.0.0 without UCX
  std::string loaded_library;                                  // path of the loaded libucp, or "" if unknown
  // The loaded UCX is older than the headers ferry was built with (UCX only
  // promises the API of its own version and older).
  bool loaded_older() const {
    return built_with_ucx && (loaded_major < built_major || (loaded_major == built_major && loaded_minor < built_minor));
  }
};
UcxVersions ucx_versions();

// Throws NotSupported when the loaded UCX is older than the one ferry was
// built with, naming both and the file loaded; nothing without UCX. The
// inter-node transport runs this check before it initializes UCX.
void check_ucx_version();

}  // namespace ferry
