#pragma once
// Shared vocabulary of the op suites (test_basic_ops, test_numeric_ops, test_float_ops,
// test_int_bool_ops): fixture access and the comparison macros.
#include <limits>
#include <type_traits>

#include "harness.hpp"

using ember::Bool;
using ember::DType;
using ember::Float;
using ember::Int;
using ember::Shape;
using ember::Slice;
using ember::TensorData;
using ember::test::Fixture;

namespace {
/// A case of tests/fixtures/tensor_ops.json.
inline Fixture fixture(const char* name) { return Fixture("tensor_ops", name); }
/// "To the end of the dim" in a Slice.
constexpr long kEnd = std::numeric_limits<long>::max();
}  // namespace

// EXPECT_CLOSE(expected, tensor expression): float values within the backend's tolerance.
// EXPECT_SAME(expected, tensor expression): exact values (ints, bools, indices).
// EXPECT_VALUES(K, expected, tensor expression): EXPECT_CLOSE for Float, EXPECT_SAME otherwise.
#define EXPECT_CLOSE(expected, ...)                                                            \
    do {                                                                                       \
        INFO("line " << __LINE__ << ": " #__VA_ARGS__);                                        \
        ember::test::check_close((__VA_ARGS__).into_data(), (expected),                        \
                                 ember::test::default_tolerance<B>());                         \
    } while (0)
#define EXPECT_SAME(expected, ...)                                                             \
    do {                                                                                       \
        INFO("line " << __LINE__ << ": " #__VA_ARGS__);                                        \
        ember::test::check_equal((__VA_ARGS__).into_data(), (expected));                       \
    } while (0)
#define EXPECT_VALUES(K, expected, ...)                                                        \
    do {                                                                                       \
        if constexpr (std::is_same_v<K, Float>) EXPECT_CLOSE(expected, __VA_ARGS__);           \
        else EXPECT_SAME(expected, __VA_ARGS__);                                               \
    } while (0)
