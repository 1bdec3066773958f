// Element types, reduction ops and AllReduce algorithm names: sizes, names, parsing,
// round trips, and InvalidArgument (naming the offending value) for bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/expect_error.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace {

using ferry::AllReduceAlgorithm;
using ferry::DataType;
using ferry::ReduceOp;

const std::vector<DataType> kTypes = {DataType::kFloat32, DataType::kFloat64,  DataType::kInt32,
                                      DataType::kInt64,   DataType::kBFloat16, DataType::kFloat16};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};
const std::vector<AllReduceAlgorithm> kAlgorithms = {
    AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kOneShot, AllReduceAlgorithm::kTwoShot,
    AllReduceAlgorithm::kRing, AllReduceAlgorithm::kRecursiveDoubling, AllReduceAlgorithm::kHierarchical};

using ferry::testing::user_part;

// Runs `fn`, expects ferry::InvalidArgument, and returns its message.
template <typename Fn>
std::string invalid_argument_message(Fn&& fn) {
  return ferry::testing::error_message<ferry::InvalidArgument>(std::forward<Fn>(fn));
}

TEST(Types, DtypeSize) {
  EXPECT_EQ(ferry::dtype_size(DataType::kFloat32), 4u);
  EXPECT_EQ(ferry::dtype_size(DataType::kFloat64), 8u);
  EXPECT_EQ(ferry::dtype_size(DataType::kInt32), 4u);
  EXPECT_EQ(ferry::dtype_size(DataType::kInt64), 8u);
  EXPECT_EQ(ferry::dtype_size(DataType::kBFloat16), 2u);
  EXPECT_EQ(ferry::dtype_size(DataType::kFloat16), 2u);
  EXPECT_EQ(ferry::dtype_size(DataType::kFloat8E4M3), 1u);
}

TEST(Types, DtypeSizeRejectsUnknownValues) {
  for (int bad : {99, -1, 7}) {
    SCOPED_TRACE("value " + std::to_string(bad));
    const std::string msg =
        invalid_argument_message([&] { (void)ferry::dtype_size(static_cast<DataType>(bad)); });
    EXPECT_NE(user_part(msg).find(std::to_string(bad)), std::string::npos)
        << "message should name the value: " << msg;
  }
}

TEST(Types, DtypeNames) {
  EXPECT_STREQ(ferry::dtype_name(DataType::kFloat32), "float32");
  EXPECT_STREQ(ferry::dtype_name(DataType::kBFloat16), "bfloat16");
  EXPECT_STREQ(ferry::dtype_name(DataType::kFloat8E4M3), "float8_e4m3");
  EXPECT_EQ(ferry::dtype_from_string("fp8"), DataType::kFloat8E4M3);
  std::set<std::string> names;
  for (DataType t : kTypes) {
    const char* name = ferry::dtype_name(t);
    ASSERT_NE(name, nullptr);
    EXPECT_STRNE(name, "unknown");
    EXPECT_GT(std::strlen(name), 0u);
    names.insert(name);
  }
  EXPECT_EQ(names.size(), kTypes.size()) << "dtype names must be distinct";
  EXPECT_STREQ(ferry::dtype_name(static_cast<DataType>(99)), "unknown");
  EXPECT_STREQ(ferry::dtype_name(static_cast<DataType>(-1)), "unknown");
}

TEST(Types, DtypeNameRoundTrip) {
  for (DataType t : kTypes) {
    SCOPED_TRACE(ferry::dtype_name(t));
    EXPECT_EQ(ferry::dtype_from_string(ferry::dtype_name(t)), t);
  }
}

TEST(Types, DtypeShortAliases) {
  EXPECT_EQ(ferry::dtype_from_string("bf16"), DataType::kBFloat16);
  EXPECT_EQ(ferry::dtype_from_string("bfloat16"), DataType::kBFloat16);
  EXPECT_EQ(ferry::dtype_from_string("fp32"), DataType::kFloat32);
  EXPECT_EQ(ferry::dtype_from_string("float32"), DataType::kFloat32);
  EXPECT_EQ(ferry::dtype_from_string("fp16"), DataType::kFloat16);
  EXPECT_EQ(ferry::dtype_from_string("fp64"), DataType::kFloat64);
}

TEST(Types, DtypeFromStringRejectsBadNames) {
  for (const std::string bad : {"float8", "bf17", "sum", "int16", "unknown"}) {
    SCOPED_TRACE(bad);
    const std::string msg = invalid_argument_message([&] { (void)ferry::dtype_from_string(bad); });
    EXPECT_NE(msg.find(bad), std::string::npos) << "message should name the bad name: " << msg;
  }
  invalid_argument_message([] { (void)ferry::dtype_from_string(""); });
}

TEST(Types, ReduceOpNames) {
  EXPECT_STREQ(ferry::reduce_op_name(ReduceOp::kSum), "sum");
  EXPECT_STREQ(ferry::reduce_op_name(ReduceOp::kProd), "prod");
  EXPECT_STREQ(ferry::reduce_op_name(ReduceOp::kMin), "min");
  EXPECT_STREQ(ferry::reduce_op_name(ReduceOp::kMax), "max");
  EXPECT_STREQ(ferry::reduce_op_name(ReduceOp::kAvg), "avg");
  EXPECT_STREQ(ferry::reduce_op_name(static_cast<ReduceOp>(99)), "unknown");
  EXPECT_STREQ(ferry::reduce_op_name(static_cast<ReduceOp>(-1)), "unknown");
}

TEST(Types, ReduceOpRoundTrip) {
  for (ReduceOp op : kOps) {
    SCOPED_TRACE(ferry::reduce_op_name(op));
    EXPECT_EQ(ferry::reduce_op_from_string(ferry::reduce_op_name(op)), op);
  }
  EXPECT_EQ(ferry::reduce_op_from_string("sum"), ReduceOp::kSum);
  EXPECT_EQ(ferry::reduce_op_from_string("prod"), ReduceOp::kProd);
  EXPECT_EQ(ferry::reduce_op_from_string("min"), ReduceOp::kMin);
  EXPECT_EQ(ferry::reduce_op_from_string("max"), ReduceOp::kMax);
  EXPECT_EQ(ferry::reduce_op_from_string("avg"), ReduceOp::kAvg);
}

TEST(Types, ReduceOpFromStringRejectsBadNames) {
  for (const std::string bad : {"xor", "summ", "float32", "unknown"}) {
    SCOPED_TRACE(bad);
    const std::string msg = invalid_argument_message([&] { (void)ferry::reduce_op_from_string(bad); });
    EXPECT_NE(msg.find(bad), std::string::npos) << "message should name the bad name: " << msg;
  }
  invalid_argument_message([] { (void)ferry::reduce_op_from_string(""); });
}

TEST(Types, AlgorithmNamesAreDistinctAndRoundTrip) {
  std::set<std::string> names;
  for (AllReduceAlgorithm a : kAlgorithms) {
    const char* name = ferry::algorithm_name(a);
    ASSERT_NE(name, nullptr);
    SCOPED_TRACE(name);
    EXPECT_GT(std::strlen(name), 0u);
    EXPECT_STRNE(name, "unknown");
    names.insert(name);
    EXPECT_EQ(ferry::algorithm_from_string(name), a);
  }
  EXPECT_EQ(names.size(), kAlgorithms.size()) << "algorithm names must be distinct";
  EXPECT_STREQ(ferry::algorithm_name(AllReduceAlgorithm::kHierarchical), "hierarchical");
}

TEST(Types, AlgorithmFromStringRejectsBadNames) {
  for (const std::string bad : {"fastest", "tree", "sum", "unknown"}) {
    SCOPED_TRACE(bad);
    const std::string msg = invalid_argument_message([&] { (void)ferry::algorithm_from_string(bad); });
    EXPECT_NE(msg.find(bad), std::string::npos) << "message should name the bad name: " << msg;
    EXPECT_NE(msg.find("hierarchical"), std::string::npos) << "message should list every name: " << msg;
  }
  invalid_argument_message([] { (void)ferry::algorithm_from_string(""); });
}

TEST(Types, AlgorithmNameOfUnknownValue) {
  // Not a valid algorithm: either "unknown" (like dtype_name / reduce_op_name) or
  // InvalidArgument; never a valid algorithm's name, never a crash.
  const auto bad = static_cast<AllReduceAlgorithm>(99);
  try {
    const char* name = ferry::algorithm_name(bad);
    ASSERT_NE(name, nullptr);
    EXPECT_STREQ(name, "unknown");
  } catch (const ferry::InvalidArgument& e) {
    EXPECT_NE(user_part(e.what()).find("99"), std::string::npos) << e.what();
  }
}

}  // namespace
