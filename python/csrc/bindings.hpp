// Pieces of ferry._C defined in separate files (module.cpp is the entry point).
#pragma once

#include <nanobind/nanobind.h>

namespace ferry::python {

void bind_allreduce(nanobind::module_& m);  // ops.cpp
void bind_ep(nanobind::module_& m);         // ops.cpp

}  // namespace ferry::python
