#include "ferry/types.hpp"

#include <algorithm>
#include <cctype>

#include "ferry/error.hpp"

namespace ferry {

size_t dtype_size(DataType type) {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kBFloat16: return 2;
    case DataType::kFloat16: return 2;
    case DataType::kFloat8E4M3: return 1;
  }
  FERRY_THROW(InvalidArgument, "unsupported data type value " << static_cast<int>(type));
}

const char* dtype_name(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat8E4M3: return "float8_e4m3";
  }
  return "unknown";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "unknown";
}

static std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

DataType dtype_from_string(const std::string& name) {
  const std::string n = lower(name);
  if (n == "float32" || n == "fp32" || n == "f32" || n == "float") return DataType::kFloat32;
  if (n == "float64" || n == "fp64" || n == "f64" || n == "double") return DataType::kFloat64;
  if (n == "int32" || n == "i32" || n == "int") return DataType::kInt32;
  if (n == "int64" || n == "i64" || n == "long") return DataType::kInt64;
  if (n == "bfloat16" || n == "bf16") return DataType::kBFloat16;
  if (n == "float16" || n == "fp16" || n == "f16" || n == "half") return DataType::kFloat16;
  if (n == "float8_e4m3" || n == "fp8" || n == "e4m3" || n == "float8_e4m3fn") return DataType::kFloat8E4M3;
  FERRY_THROW(InvalidArgument, "unknown data type '" << name
                                   << "' (expected float32, float64, int32, int64, bfloat16, float16, float8_e4m3)");
}

ReduceOp reduce_op_from_string(const std::string& name) {
  const std::string n = lower(name);
  if (n == "sum") return ReduceOp::kSum;
  if (n == "prod" || n == "product") return ReduceOp::kProd;
  if (n == "min") return ReduceOp::kMin;
  if (n == "max") return ReduceOp::kMax;
  if (n == "avg" || n == "mean") return ReduceOp::kAvg;
  FERRY_THROW(InvalidArgument, "unknown reduce op '" << name << "' (expected sum, prod, min, max, avg)");
}

}  // namespace ferry
