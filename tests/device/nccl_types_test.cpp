// Strata's dtypes, reductions and errors in NCCL's terms (built where NCCL's header is; no GPU
// needed).
#include "device/cuda/nccl_types.hpp"

#include <gtest/gtest.h>

#include "device/nccl.hpp"

using namespace strata;

namespace {

TEST(NcclTypes, EveryDtypeMapsOrIsRefusedByName) {
  const std::pair<DataType, ncclDataType_t> mapped[] = {
      {DataType::f32, ncclFloat32},   {DataType::f64, ncclFloat64}, {DataType::f16, ncclFloat16},
      {DataType::bf16, ncclBfloat16}, {DataType::i8, ncclInt8},     {DataType::u8, ncclUint8},
      {DataType::boolean, ncclUint8}, {DataType::i32, ncclInt32},   {DataType::u32, ncclUint32},
      {DataType::i64, ncclInt64},     {DataType::u64, ncclUint64}};
  for (auto [dt, nccl] : mapped) {
    ASSERT_TRUE(device::nccl_dtype(dt).has_value()) << dtype_name(dt);
    EXPECT_EQ(*device::nccl_dtype(dt), nccl) << dtype_name(dt);
    EXPECT_EQ(device::nccl_refuses(dt), "") << dtype_name(dt);
  }
  for (DataType dt : {DataType::i16, DataType::c64, DataType::c128}) {
    EXPECT_FALSE(device::nccl_dtype(dt).has_value()) << dtype_name(dt);
    EXPECT_EQ(device::nccl_refuses(dt), "NCCL has no " + std::string(dtype_name(dt)) + " type");
  }
}

TEST(NcclTypes, EveryReductionMapsOrIsRefusedByName) {
  const std::pair<ReduceOp, ncclRedOp_t> mapped[] = {{ReduceOp::sum, ncclSum},
                                                     {ReduceOp::prod, ncclProd},
                                                     {ReduceOp::max, ncclMax},
                                                     {ReduceOp::min, ncclMin},
                                                     {ReduceOp::avg, ncclAvg}};
  for (auto [op, nccl] : mapped) {
    ASSERT_TRUE(device::nccl_op(op).has_value()) << op_name(op);
    EXPECT_EQ(*device::nccl_op(op), nccl);
    EXPECT_EQ(device::nccl_refuses(DataType::f32, op), "");
  }
  for (ReduceOp op : {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor}) {
    EXPECT_FALSE(device::nccl_op(op).has_value());
    EXPECT_EQ(device::nccl_refuses(DataType::i32, op),
              "NCCL has no " + std::string(op_name(op)) + " reduction");
  }
  // boolean travels as u8: max and min are or and and; a sum would leave 0/1 behind.
  EXPECT_EQ(device::nccl_refuses(DataType::boolean, ReduceOp::max), "");
  EXPECT_EQ(device::nccl_refuses(DataType::boolean, ReduceOp::min), "");
  EXPECT_EQ(device::nccl_refuses(DataType::boolean, ReduceOp::sum),
            "NCCL reduces boolean (as u8) by max and min only, not sum");
}

TEST(NcclTypes, FailuresNameTheCallNcclsReasonAndItsLastError) {
  EXPECT_EQ(device::nccl_failure("ncclAllReduce", ncclGetErrorString(ncclInvalidArgument),
                                 "count is too large"),
            "ncclAllReduce failed: " + std::string(ncclGetErrorString(ncclInvalidArgument)) +
                " (NCCL: count is too large)");
  EXPECT_EQ(device::nccl_failure("ncclCommInitRank", ncclGetErrorString(ncclSystemError), ""),
            "ncclCommInitRank failed: " + std::string(ncclGetErrorString(ncclSystemError)));
}

}  // namespace
