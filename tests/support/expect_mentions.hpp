// The one text assertion the message tests share: a fragment appears, and the whole text is
// shown when it does not.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace attnbatch::testing {

inline void expect_mentions(const std::string& text, const std::string& part) {
    EXPECT_NE(text.find(part), std::string::npos) << "expected '" << part << "' in:\n" << text;
}

}  // namespace attnbatch::testing
