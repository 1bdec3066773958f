// Checks on thrown exceptions and their messages, for every test tier (no MPI,
// no CUDA): catching exactly the expected type, and looking into the part of the
// message the thrower wrote; and ScopedEnv, for tests of knobs.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <exception>
#include <optional>
#include <regex>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

namespace ferry::testing {

// The part of an error message the thrower wrote: without the "[check failed: ...]"
// and "(file:line)" the check macros append, which may contain any digit.
inline std::string user_part(const std::string& what) {
  const size_t check = what.find(" [check failed:");
  if (check != std::string::npos) return what.substr(0, check);
  const size_t where = what.rfind(" (");
  if (where != std::string::npos && !what.empty() && what.back() == ')') return what.substr(0, where);
  return what;
}

// `number` appears in the message as a whole number (not as part of a longer one).
inline bool names_number(const std::string& what, unsigned long long number) {
  const std::regex re("(^|[^0-9])" + std::to_string(number) + "([^0-9]|$)");
  return std::regex_search(user_part(what), re);
}

// `needle` is in `haystack`, ignoring case.
inline bool contains_ci(std::string haystack, std::string needle) {
  for (auto* s : {&haystack, &needle})
    for (char& c : *s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return haystack.find(needle) != std::string::npos;
}

// E's name as written in the source ("ferry::InvalidArgument"), where the
// compiler can tell.
template <typename E>
std::string type_name() {
#if __has_include(<cxxabi.h>)
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(E).name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : typeid(E).name();
  std::free(name);
  return out;
#else
  return typeid(E).name();
#endif
}

// Runs `fn` and expects it to throw an E: returns the message, or (after a
// non-fatal failure) nullopt when it returned or threw something else.
template <typename E, typename Fn>
std::optional<std::string> caught(Fn&& fn) {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>) {
      fn();
      ADD_FAILURE() << "expected " << type_name<E>() << ", nothing was thrown";
    } else {
      const auto result = fn();
      ADD_FAILURE() << "expected " << type_name<E>() << ", the call returned " << ::testing::PrintToString(result);
    }
  } catch (const E& e) {
    return std::string(e.what());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected " << type_name<E>() << ", got another exception: " << e.what();
  }
  return std::nullopt;
}

// Same, with "" for no (or the wrong) exception.
template <typename E, typename Fn>
std::string error_message(Fn&& fn) {
  return caught<E>(std::forward<Fn>(fn)).value_or(std::string());
}

// Sets (or unsets, for nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace ferry::testing
