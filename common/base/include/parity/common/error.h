// Error types and invariant checks shared by every parity module.
//
// Two kinds of failure (docs/design.md, "Errors and bad input"):
//   - Recoverable failures caused by something outside the program (a file, a flag, a case key,
//     a rank that died) are typed exceptions. Their message names the operation, the
//     file/rank/tensor, what was expected and what was found, and the fix.
//   - Broken invariants (bugs in parity itself) use PARITY_CHECK*, which report the expression
//     and the values involved.
// Only cli/ turns an exception into an exit code; library code never calls exit().
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace parity {

// Bad input the user controls: a file's content, a flag, a case key. Fix it and run again.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A run could not complete: a rank died or timed out, a loss or gradient became non-finite.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broken invariant inside parity: a bug to report, never a user mistake.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] inline void fail_check(const char* file, int line, const std::string& what) {
  std::ostringstream out;
  out << "internal check failed at " << file << ":" << line << ": " << what
      << " (this is a bug in parity; please report it with the command that triggered it)";
  throw InternalError(out.str());
}
}  // namespace detail

}  // namespace parity

#define PARITY_CHECK(condition)                                                   \
  do {                                                                            \
    if (!(condition)) ::parity::detail::fail_check(__FILE__, __LINE__, #condition); \
  } while (false)

#define PARITY_CHECK_OP_(a, b, op)                                                    \
  do {                                                                                \
    const auto& parity_check_a_ = (a);                                                \
    const auto& parity_check_b_ = (b);                                                \
    if (!(parity_check_a_ op parity_check_b_)) {                                      \
      std::ostringstream parity_check_out_;                                           \
      parity_check_out_ << #a " " #op " " #b " (" << parity_check_a_ << " vs "         \
                        << parity_check_b_ << ")";                                    \
      ::parity::detail::fail_check(__FILE__, __LINE__, parity_check_out_.str());      \
    }                                                                                 \
  } while (false)

#define PARITY_CHECK_EQ(a, b) PARITY_CHECK_OP_(a, b, ==)
#define PARITY_CHECK_LT(a, b) PARITY_CHECK_OP_(a, b, <)
#define PARITY_CHECK_LE(a, b) PARITY_CHECK_OP_(a, b, <=)
