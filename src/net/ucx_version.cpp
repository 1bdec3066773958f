// ferry/version.hpp with UCX: the headers' version against the loaded library's.
#include <dlfcn.h>
#include <ucp/api/ucp.h>

#include "ferry/error.hpp"
#include "ferry/version.hpp"

namespace ferry {

UcxVersions ucx_versions() {
  UcxVersions v;
  v.built_with_ucx = true;
  v.built_major = UCP_API_MAJOR;
  v.built_minor = UCP_API_MINOR;
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  v.loaded_major = static_cast<int>(major);
  v.loaded_minor = static_cast<int>(minor);
  v.loaded_release = static_cast<int>(release);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ucp_get_version), &info) != 0 && info.dli_fname != nullptr)
    v.loaded_library = info.dli_fname;
  return v;
}

void check_ucx_version() {
  const UcxVersions v = ucx_versions();
  FERRY_CHECK(!v.loaded_older(), NotSupported,
              "ferry was built against UCX " << v.built_major << "." << v.built_minor << " but this process loaded UCX "
                  << v.loaded_major << "." << v.loaded_minor << "." << v.loaded_release << " ("
                  << (v.loaded_library.empty() ? "path unknown" : v.loaded_library)
                  << "), which is older: put the UCX ferry was built with first on the library path "
                     "(LD_LIBRARY_PATH), or rebuild ferry against this one (-DFERRY_UCX_ROOT)");
}

}  // namespace ferry
