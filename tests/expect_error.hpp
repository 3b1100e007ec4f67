// Checking a refusal: what a strata::Error said, or that it is invalid_argument naming each part.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/error.hpp"

namespace testing_errors {

/// What the strata::Error thrown by `f` says; "no error" when `f` throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const strata::Error& e) {
    return e.what();
  }
  return "no error";
}

/// Expects `f` to throw a strata::Error of code invalid_argument whose message holds every one of
/// `needles`.
template <class F>
void expect_invalid(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.code(), strata::ErrorCode::invalid_argument) << e.what();
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << "\nlacks: " << n;
  }
}

}  // namespace testing_errors
