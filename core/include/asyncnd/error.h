// asyncnd::Error: the one exception type the library throws for bad input and failed ops.
#pragma once

#include <stdexcept>
#include <string>

namespace asyncnd {

// Thrown at the call site for bad input (shapes, devices, deleted variables), before anything is
// queued, and rethrown at a wait for an op that failed while it ran. what() names the operation
// and the offending shapes or values, e.g. "dot: inner dimensions differ: a=[2,3] b=[4,5]".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace asyncnd
