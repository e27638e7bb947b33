// "did you mean": the known name closest to a misspelt one, by edit distance. Written here
// rather than taken from a library: it is a dozen lines, and Boost.Program_options has none.
#pragma once

#include <string>
#include <vector>

namespace attnbatch::cli {

// The name of `names` closest to `word` (Levenshtein distance), or "" when none is close
// enough to be what was meant (more than a third of its letters, and at least 2, differ).
std::string closest_name(const std::string& word, const std::vector<std::string>& names);

// "; did you mean 'causal'?" or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& names, const std::string& prefix = "");

}  // namespace attnbatch::cli
