// Element types and reduction operations shared by the public APIs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ferry {

enum class DataType : int {
  kFloat32 = 0,
  kFloat64 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kBFloat16 = 4,
  kFloat16 = 5,
  kFloat8E4M3 = 6,  // EP dispatch only (with per-128-column fp32 scales); AllReduce rejects it
};

enum class ReduceOp : int {
  kSum = 0,
  kProd = 1,
  kMin = 2,
  kMax = 3,
  kAvg = 4,
};

size_t dtype_size(DataType type);        // throws InvalidArgument for unknown values
const char* dtype_name(DataType type);   // "float32", ... ; "unknown" for bad values
const char* reduce_op_name(ReduceOp op); // "sum", ...   ; "unknown" for bad values
DataType dtype_from_string(const std::string& name);     // "bf16"/"bfloat16", "fp32"/"float32", ...
ReduceOp reduce_op_from_string(const std::string& name); // "sum", "prod", "min", "max", "avg"

}  // namespace ferry
