// A minimal JSON writer for the machine-readable summaries (--json): correct string escaping
// and round-trip numbers, one object on one line. Not a general library; no parsing.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace attnbatch::cli {

class JsonWriter {
public:
    JsonWriter& begin_object();
    JsonWriter& end_object();
    JsonWriter& begin_array();
    JsonWriter& end_array();
    JsonWriter& key(const std::string& name);  // inside an object, before its value

    JsonWriter& value(const std::string& text);
    JsonWriter& value(const char* text);
    template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
    JsonWriter& value(T number) {  // every integer type, so no call is ambiguous
        return integer(static_cast<std::int64_t>(number));
    }
    JsonWriter& value(double number);  // NaN and infinities, which JSON lacks, become null
    JsonWriter& value(bool flag);
    JsonWriter& null();

    const std::string& text() const { return text_; }

private:
    JsonWriter& integer(std::int64_t number);
    void separate();  // the comma before every element but the first
    std::string text_;
    std::vector<bool> first_;  // one per open container
    bool after_key_ = false;
};

std::string json_quote(const std::string& text);

}  // namespace attnbatch::cli
