// NOTE [Real NCCL] (real_nccl.hpp).
#include "real_nccl.hpp"

#include <dlfcn.h>

#include <optional>

#include "common/knobs.hpp"

#ifndef FERRY_NCCL_DEFAULT_LIBRARY
#define FERRY_NCCL_DEFAULT_LIBRARY "libnccl.so.2"
#endif

namespace ferry::nccl_shim {

namespace {

RealNccl load() {
  RealNccl r;
  std::string path = FERRY_NCCL_DEFAULT_LIBRARY;
  try {
    if (std::optional<std::string> set = knobs::kNcclLibrary.read()) path = *set;
  } catch (const std::exception& e) {
    r.error = e.what();
    return r;
  }
  r.path = path;
  r.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (r.handle == nullptr) {
    const char* why = dlerror();
    r.error = "libferry_nccl: could not load the real NCCL '" + path + "' (" + (why ? why : "unknown") +
              "); set FERRY_NCCL_LIBRARY to its path";
    return r;
  }
#define FERRY_NCCL_RESOLVE(name) r.name = reinterpret_cast<decltype(&::name)>(dlsym(r.handle, #name));
  FERRY_NCCL_FUNCTIONS(FERRY_NCCL_RESOLVE)
#undef FERRY_NCCL_RESOLVE
  return r;
}

}  // namespace

const RealNccl& real_nccl() {
  static const RealNccl loaded = load();
  return loaded;
}

}  // namespace ferry::nccl_shim
