// The knob registry's reading and printing (NOTE [Knobs], knobs.hpp).
#include "common/knobs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <sstream>
#include <utility>
#include <vector>

#include "ferry/error.hpp"

namespace ferry::knobs {

namespace {

std::string unit_suffix(const Info& knob) { return *knob.unit ? std::string(" (") + knob.unit + ")" : ""; }

// What an int/size knob accepts, in words: "a positive integer (milliseconds)".
std::string number_rule(const Info& knob) {
  std::ostringstream os;
  if (knob.min <= 1) os << (knob.min == 0 ? "a non-negative integer" : "a positive integer");
  else os << "an integer of at least " << knob.min;
  return os.str() + unit_suffix(knob);
}

bool bounded(const Info& knob) { return knob.max < kSizeMax >> 1; }

std::vector<std::string_view> choices_of(const Info& knob) {
  std::vector<std::string_view> out;
  for (const char* c : knob.choices)
    if (c != nullptr) out.emplace_back(c);
  return out;
}

std::string join(const std::vector<std::string_view>& items, const char* separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + std::string(items[i]);
  return out;
}

}  // namespace

std::optional<std::string> raw(const Info& knob) {
  const char* v = std::getenv(knob.name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

bool parse_bool(const Info& knob, std::string_view value) {
  if (value == "1" || value == "on" || value == "true") return true;
  if (value == "0" || value == "off" || value == "false") return false;
  FERRY_THROW(InvalidArgument, knob.name << " must be 0 or 1 (or off/on, false/true), got '" << value << "'");
}

uint64_t parse_number(const Info& knob, std::string_view value) {
  uint64_t v = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, v, 10);
  const bool digits = !value.empty() && value.front() >= '0' && value.front() <= '9' && ptr == end;
  if (!digits || (ec != std::errc() && ec != std::errc::result_out_of_range) || (ec == std::errc() && v < knob.min))
    FERRY_THROW(InvalidArgument, knob.name << " must be " << number_rule(knob) << ", got '" << value << "'");
  if (ec != std::errc() || v > knob.max)
    FERRY_THROW(InvalidArgument,
                knob.name << " must be at most " << knob.max << unit_suffix(knob) << ", got '" << value << "'");
  return v;
}

int parse_choice(const Info& knob, std::string_view value) {
  const std::vector<std::string_view> names = choices_of(knob);
  for (size_t i = 0; i < names.size(); ++i)
    if (value == names[i] || value == std::to_string(i)) return static_cast<int>(i);
  FERRY_THROW(InvalidArgument, knob.name << " must be one of " << join(names, ", ") << " (or 0 to " << names.size() - 1
                                         << "), got '" << value << "'");
}

const char* fixed_default(const Info& knob) {
  if (knob.default_value == nullptr)
    FERRY_THROW(Error, knob.name << " has no fixed default (it is computed where it is read: " << knob.default_note
                                 << ")");
  return knob.default_value;
}

// ---------------------------------------------------------------- printing

const char* type_name(Type type) {
  switch (type) {
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kSize: return "size";
    case Type::kString: return "string";
    case Type::kEnum: return "enum";
  }
  return "unknown";
}

std::string type_text(const Info& knob) {
  std::ostringstream os;
  os << type_name(knob.type);
  if (knob.type == Type::kInt || knob.type == Type::kSize) {
    if (bounded(knob) && knob.max != kIntMax) os << " " << knob.min << ".." << knob.max;
    else if (knob.min > 0) os << " >= " << knob.min;
    if (*knob.unit) os << " (" << knob.unit << ")";
  } else if (knob.type == Type::kEnum) {
    os << ": " << join(choices_of(knob), ", ");
  }
  return os.str();
}

std::string default_text(const Info& knob) {
  if (knob.default_value == nullptr) return knob.default_note;
  std::string out = knob.default_value;
  if (*knob.default_note) out += std::string(" (") + knob.default_note + ")";
  return out;
}

namespace {

// The default as docs/knobs.md shows it: a literal in code font.
std::string default_markdown(const Info& knob) {
  if (knob.default_value == nullptr) return knob.default_note;
  std::string out = std::string("`") + knob.default_value + "`";
  if (*knob.default_note) out += std::string(" (") + knob.default_note + ")";
  return out;
}

}  // namespace

namespace {

// Why the value set here does not parse ("" when it does, or is unset).
std::string problem(const Info& knob) {
  const std::optional<std::string> v = raw(knob);
  if (!v) return "";
  try {
    switch (knob.type) {
      case Type::kBool: parse_bool(knob, *v); break;
      case Type::kInt:
      case Type::kSize: parse_number(knob, *v); break;
      case Type::kEnum: parse_choice(knob, *v); break;
      case Type::kString: break;
    }
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    what = what.substr(0, what.rfind(" ("));  // without the thrower's " (file:line)"
    return what.rfind("ferry: ", 0) == 0 ? what.substr(7) : what;
  }
  return "";
}

// The value set here, as `ferry-bench --knobs` shows it.
std::string current_text(const Info& knob) {
  const std::optional<std::string> v = raw(knob);
  if (!v) return "";
  return problem(knob).empty() ? *v : *v + " (INVALID)";
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string table() {
  size_t name_w = 8, type_w = 4, default_w = 7, value_w = 5;
  for (const Info& k : kRegistry) {
    name_w = std::max(name_w, std::string(k.name).size());
    type_w = std::max(type_w, type_text(k).size());
    default_w = std::max(default_w, default_text(k).size());
    value_w = std::max(value_w, current_text(k).size());
  }
  std::ostringstream os;
  os << "FERRY_* environment knobs (docs/knobs.md). Unset or empty: the default; a value that does not parse\n"
        "makes the object reading it throw InvalidArgument. 'set' is this environment's value.\n";
  for (const Area& area : kAreas) {
    os << "\n" << area.name << ": " << area.when << "\n";
    os << "  " << pad("variable", name_w) << "  " << pad("type", type_w) << "  " << pad("default", default_w) << "  "
       << pad("set", value_w) << "  meaning\n";
    for (const Info& k : kRegistry) {
      if (std::string_view(k.area) != area.name) continue;
      os << "  " << pad(k.name, name_w) << "  " << pad(type_text(k), type_w) << "  " << pad(default_text(k), default_w)
         << "  " << pad(current_text(k), value_w) << "  " << k.meaning << "\n";
    }
  }
  return os.str();
}

std::vector<std::string> problems() {
  std::vector<std::string> out;
  for (const Info& k : kRegistry)
    if (std::string why = problem(k); !why.empty()) out.push_back(std::move(why));
  return out;
}

std::string markdown() {
  std::ostringstream os;
  os << "# Environment knobs\n\n"
        "<!-- Generated from the registry in src/common/knobs.hpp by `ferry-bench --knobs --markdown`;\n"
        "     tests/unit/test_knobs.cpp fails while this page and the registry differ. -->\n\n"
        "Every `FERRY_*` environment variable the library and `ferry-bench` read. Unset or empty: the\n"
        "default. Any other value must parse as the knob's type and lie in its range, or the object\n"
        "reading it throws `ferry::InvalidArgument` naming the variable and the value. `bool`: `0`/`1`\n"
        "(also `off`/`on`, `false`/`true`); `int`, `size`: decimal, no sign or suffix; `enum`: one of\n"
        "the names or its position (`0`, `1`, ...); `string`: as it is. Values are read when the object\n"
        "using them is built, not per call. `ferry-bench --knobs` prints this table with the values\n"
        "set in the current environment.\n";
  for (const Area& area : kAreas) {
    std::string when = area.when;
    when[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(when[0])));
    os << "\n## " << area.name << "\n\n" << when << ".\n\n";
    os << "| Variable | Type | Default | Meaning |\n|---|---|---|---|\n";
    for (const Info& k : kRegistry) {
      if (std::string_view(k.area) != area.name) continue;
      os << "| `" << k.name << "` | " << markdown_cell(type_text(k)) << " | " << markdown_cell(default_markdown(k))
         << " | " << markdown_cell(k.meaning) << " |\n";
    }
  }
  os << "\nNot knobs of the library: the tests (`FERRY_TEST_*`, `FERRY_FAULT_*`, `FERRY_SOAK_*`,\n"
        "`FERRY_FUZZ_*`) and the scripts (`scripts/*.sh`) read variables of their own, described where\n"
        "they are read; `UCX_TLS` and `UCX_NET_DEVICES` steer UCX itself.\n";
  return os.str();
}

}  // namespace ferry::knobs
