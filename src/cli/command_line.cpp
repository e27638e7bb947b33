#include "command_line.hpp"

#include "auto_count.hpp"
#include "commands.hpp"
#include "suggest.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

extern char** environ;

namespace attnbatch::cli {

namespace {

ConfigReader& config_reader() {
    static ConfigReader reader = [](const std::string& path) -> std::optional<std::string> {
        std::ifstream file(path);
        if (!file) return std::nullopt;
        std::ostringstream content;
        content << file.rdbuf();
        return content.str();
    };
    return reader;
}

// ATTNBATCH_SEQ_LEN -> seq-len, for the options this command knows; others are ignored
// (a variable meant for another subcommand must not break this one).
std::string environment_name_to_option(const std::string& variable, const po::options_description& options) {
    const std::string prefix = "ATTNBATCH_";
    if (variable.compare(0, prefix.size(), prefix) != 0) return {};
    std::string name;
    for (char c : variable.substr(prefix.size())) {
        name += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (name == "config") return name;
    return options.find_nothrow(name, false) ? name : std::string{};
}

std::string value_text(const po::variable_value& value) {
    const boost::any& any = value.value();
    if (const auto* s = boost::any_cast<std::string>(&any)) return *s;
    if (const auto* i = boost::any_cast<int>(&any)) return std::to_string(*i);
    if (const auto* l = boost::any_cast<long>(&any)) return std::to_string(*l);
    if (const auto* ll = boost::any_cast<long long>(&any)) return std::to_string(*ll);
    if (const auto* u = boost::any_cast<unsigned long>(&any)) return std::to_string(*u);
    if (const auto* u = boost::any_cast<unsigned>(&any)) return std::to_string(*u);
    if (const auto* d = boost::any_cast<double>(&any)) {
        std::ostringstream out;
        out << *d;
        return out.str();
    }
    if (const auto* b = boost::any_cast<bool>(&any)) return *b ? "true" : "false";
    if (const auto* count = boost::any_cast<AutoCount>(&any)) return to_string(*count);
    return "(a value of a type --print-config cannot show)";
}

// A po::error's message. Boost.Program_options (1.74) fills its template by replacing each
// %name% until none is left, so a token that itself contains %name% ("--x%original_token%")
// made what() loop forever; the placeholders inside the substituted values lose their '%'.
std::string error_text(const po::error& error) {
    if (const auto* named = dynamic_cast<const po::error_with_option_name*>(&error)) {
        struct Access : po::error_with_option_name {
            static std::map<std::string, std::string>& substitutions(const po::error_with_option_name& e) {
                return const_cast<po::error_with_option_name&>(e).*(&Access::m_substitutions);
            }
        };
        std::map<std::string, std::string>& substitutions = Access::substitutions(*named);
        std::vector<std::string> keys{"canonical_option", "prefix"};
        for (const auto& entry : substitutions) keys.push_back(entry.first);
        for (auto& entry : substitutions) {
            for (const std::string& key : keys) {
                const std::string placeholder = '%' + key + '%';
                for (std::size_t at; (at = entry.second.find(placeholder)) != std::string::npos;) {
                    entry.second.replace(at, placeholder.size(), key);
                }
            }
        }
    }
    return error.what();
}

// The long names of `options`, for suggestions.
std::vector<std::string> option_names(const po::options_description& options) {
    std::vector<std::string> names;
    for (const auto& option : options.options()) names.push_back(option->long_name());
    return names;
}

std::string trimmed(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// The options that steer the reading of options rather than the job: from a file, help came
// too late to act, config could not chain another file, and print-config acted even when
// written "false" (a flag is on when present). Refused in every section.
bool command_line_only(const std::string& key) { return key == "help" || key == "config" || key == "print-config"; }

// A [section] must name a subcommand and a key that applies to this one must be one of its
// options: a misspelling would otherwise be ignored (a section) or refused without a hint.
void check_config_line(const std::string& where, const std::string& section, const std::string& key, const CommandSpec& spec,
                       const po::options_description& all) {
    if (key.empty()) {
        const std::vector<std::string> sections = subcommand_names();
        if (std::find(sections.begin(), sections.end(), section) != sections.end()) return;
        std::string known;
        for (const std::string& name : sections) known += (known.empty() ? "" : ", ") + name;
        const std::string best = closest_name(section, sections);
        throw Error(exit_usage, where + ": unknown section [" + section + "]" +
                                    (best.empty() ? std::string() : "; did you mean [" + best + "]?") +
                                    " (a section names a subcommand: " + known + ")");
    }
    if (all.find_nothrow(key, false)) return;
    throw Error(exit_usage, where + ": unrecognised option '" + key + "' for attnbatch " + spec.name +
                                did_you_mean(key, option_names(all)) +
                                (section.empty() ? " (keys before any [section] apply to every subcommand that reads the file)"
                                                 : ""));
}

}  // namespace

std::string describe_options(const po::variables_map& vm) {
    std::ostringstream out;
    for (const auto& [name, value] : vm) {
        if (name == "print-config" || name == "help") continue;
        out << name << " = " << (value.empty() ? std::string("(flag)") : value_text(value))
            << (value.defaulted() ? "  # default" : "") << '\n';
    }
    return out.str();
}

void set_config_reader(ConfigReader reader) { config_reader() = std::move(reader); }

bool parse_command_line(const CommandSpec& spec, po::options_description& options,
                        const std::vector<std::string>& args, po::variables_map& vm,
                        const po::options_description* hidden) {
    po::options_description common("Common options");
    common.add_options()
        ("help,h", "show this help with examples")
        ("config", po::value<std::string>()->value_name("FILE.ini"),
         "read options from an INI file (keys named as the long options; [sections] allowed)")
        ("print-config", "print the resolved options (command line > ATTNBATCH_* > config > defaults) and exit");
    po::options_description all;
    all.add(options).add(common);
    po::options_description shown = all;
    if (hidden) all.add(*hidden);

    try {
        po::store(po::command_line_parser(args).options(all).run(), vm);
        // Parsed one variable at a time, so that a bad value names the variable it came from.
        for (char** entry = environ; entry && *entry; ++entry) {
            const std::string text = *entry;
            const std::size_t equals = text.find('=');
            if (equals == std::string::npos) continue;
            const std::string variable = text.substr(0, equals);
            // Only the options --help lists: an unlisted old spelling (bench --dim) must not
            // pick up a variable that means something else (ATTNBATCH_DIM, generate's d).
            const std::string option = environment_name_to_option(variable, shown);
            if (option.empty()) continue;
            // As in a --config file, but for ATTNBATCH_CONFIG, which names the file to read: a
            // flag without a value is on whenever it is set, so ATTNBATCH_HELP=false showed help.
            if (option != "config" && command_line_only(option)) {
                throw Error(exit_usage, "environment variable " + text + ": '" + option +
                                            "' may be given only on the command line (--" + option +
                                            "), not as an ATTNBATCH_* variable; hint: unset " + variable);
            }
            try {
                po::store(po::parse_environment(all, [&shown, &variable](const std::string& name) {
                              return name == variable ? environment_name_to_option(name, shown) : std::string{};
                          }),
                          vm);
            } catch (const po::error& e) {
                throw Error(exit_usage, "environment variable " + text + ": " + error_text(e) +
                                                "; hint: fix or unset " + variable);
            }
        }
        if (vm.count("help")) {
            std::cout << "Usage: attnbatch " << spec.name << " [options]\n" << spec.summary << "\n\n"
                      << shown << "\nExamples:\n" << spec.examples;
            return false;
        }
        if (vm.count("config")) {
            const std::string path = vm["config"].as<std::string>();
            const std::optional<std::string> content = config_reader()(path);
            if (!content) {
                throw Error(exit_usage, "--config: cannot open '" + path + "' (expected a readable INI file)");
            }
            std::istringstream file(*content);
            // Keys before any section apply to every subcommand; a [name] section only to the
            // subcommand of that name, so one file can configure generate, run and verify.
            std::ostringstream flattened;
            std::string line;
            std::string section;
            int line_number = 0;
            while (std::getline(file, line)) {
                ++line_number;
                const auto first = line.find_first_not_of(" \t\r");
                if (first != std::string::npos && line[first] == '[') {
                    const auto close = line.find(']', first);
                    if (close == std::string::npos) {
                        throw Error(exit_usage, "--config " + path + ":" + std::to_string(line_number) +
                                                        ": unterminated section header (expected [name])");
                    }
                    section = trimmed(line.substr(first + 1, close - first - 1));
                    check_config_line("--config " + path + ":" + std::to_string(line_number), section, "", spec, all);
                    flattened << '\n';
                    continue;
                }
                const bool applies = section.empty() || section == spec.name;
                const std::size_t equals = line.find('=');
                if (first != std::string::npos && line[first] != '#' && line[first] != ';' && equals != std::string::npos) {
                    const std::string where = "--config " + path + ":" + std::to_string(line_number);
                    const std::string key = trimmed(line.substr(first, equals - first));
                    if (command_line_only(key)) {
                        throw Error(exit_usage, where + ": '" + key + "' may be given only on the command line (--" + key +
                                                    "), not in a --config file");
                    }
                    if (applies) check_config_line(where, section, key, spec, all);
                }
                flattened << (applies ? line : std::string()) << '\n';
            }
            std::istringstream text(flattened.str());
            try {
                po::store(po::parse_config_file(text, all, false), vm);
            } catch (const po::error& e) {
                throw Error(exit_usage, "--config " + path + ": " + error_text(e));
            }
        }
        po::notify(vm);
    } catch (const po::unknown_option& e) {
        std::string name = e.get_option_name();
        const std::size_t dashes = name.find_first_not_of('-');
        name = dashes == std::string::npos ? name : name.substr(dashes);
        throw Error(exit_usage, error_text(e) + did_you_mean(name, option_names(all), "--") + " (see 'attnbatch " +
                                    spec.name + " --help')");
    } catch (const po::error& e) {
        throw Error(exit_usage, error_text(e) + " (see 'attnbatch " + spec.name + " --help')");
    }
    if (vm.count("print-config")) {
        std::cout << describe_options(vm);
        return false;
    }
    return true;
}

}  // namespace attnbatch::cli
