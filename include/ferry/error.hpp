// ferry error hierarchy and check macros.
//
// Every failure the library reports is a subclass of ferry::Error. The check
// macros build messages that name the failed expression, the file and the line;
// bad arguments are reported with the offending values.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ferry {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed something the API cannot accept (null pointer, bad size, ...).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A CUDA runtime or driver call failed.
class CudaError : public Error {
 public:
  using Error::Error;
};

// Processes could not find or talk to each other (MPI, TCP, callback).
class BootstrapError : public Error {
 public:
  using Error::Error;
};

// A wait (socket, device flag) ran past its deadline.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The communicator hit a fatal error earlier (e.g. a device timeout) and refuses work.
class AbortedError : public Error {
 public:
  using Error::Error;
};

// Ranks disagree about a collective (symmetric allocation sizes/order, ...).
class MismatchError : public Error {
 public:
  using Error::Error;
};

// The inter-node transport failed: a peer process died or its endpoint broke.
class TransportError : public Error {
 public:
  using Error::Error;
};

// A feature is not available with this build or hardware.
class NotSupported : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename E>
[[noreturn]] inline void throw_error(const char* file, int line, const std::string& what) {
  std::ostringstream os;
  os << "ferry: " << what << " (" << file << ":" << line << ")";
  throw E(os.str());
}
}  // namespace detail

}  // namespace ferry

// FERRY_CHECK(cond, ExceptionType, message-stream): throws ExceptionType naming the
// condition, the message and the place. Usage:
//   FERRY_CHECK(count > 0, ferry::InvalidArgument, "count must be > 0, got " << count);
#define FERRY_CHECK(cond, ExcType, msg)                                                  \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::ostringstream ferry_check_os_;                                                \
      ferry_check_os_ << msg << " [check failed: " #cond "]";                            \
      ::ferry::detail::throw_error<ExcType>(__FILE__, __LINE__, ferry_check_os_.str());  \
    }                                                                                    \
  } while (0)

#define FERRY_THROW(ExcType, msg)                                                        \
  do {                                                                                   \
    std::ostringstream ferry_check_os_;                                                  \
    ferry_check_os_ << msg;                                                              \
    ::ferry::detail::throw_error<ExcType>(__FILE__, __LINE__, ferry_check_os_.str());    \
  } while (0)

#define FERRY_ARG_CHECK(cond, msg) FERRY_CHECK(cond, ::ferry::InvalidArgument, msg)
