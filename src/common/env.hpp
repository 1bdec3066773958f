// Reading tuning variables from the environment (host only).
#pragma once

#include <cstddef>

namespace ferry {

// The decimal value of environment variable `name`, or `fallback` when it is
// unset or empty. For tuning knobs: no validation beyond that.
size_t env_size(const char* name, size_t fallback);

}  // namespace ferry
