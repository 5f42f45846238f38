// [optable] The op table (asyncnd/detail/op_table.h) against the tests: every public op has a row
// in the backend conformance table, and every gradient op the table derives (each op, and each
// binary op's scalar forms) appears in a graph that a gradient check differentiates. The
// JavaScript side (a method and a function per op) is wasm/test/op_table.test.js.
#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "asyncnd/detail/op_table.h"
#include "autograd/autograd_internal.h"
#include "conformance_cases.h"
#include "gradient_cases.h"

using namespace asyncnd;
using namespace asyncnd_test;
using detail::GradOp;

namespace {

struct GradName {
  GradOp op;
  const char* name;
};
const std::vector<GradName>& grad_ops() {
  static const std::vector<GradName> ops = {
#define GRAD_ONE(name, Name) {GradOp::k##Name, #name},
#define GRAD_BINARY(name, Name) \
  {GradOp::k##Name, #name}, {GradOp::k##Name##Scalar, #name "(x, s)"}, {GradOp::kR##Name##Scalar, #name "(s, x)"},
      ASYNCND_UNARY_OPS(GRAD_ONE) ASYNCND_BINARY_OPS(GRAD_BINARY) ASYNCND_REDUCE_OPS(GRAD_ONE)
          ASYNCND_OTHER_OPS(GRAD_ONE)
#undef GRAD_ONE
#undef GRAD_BINARY
  };
  return ops;
}

// Every GradOp in the graph recorded for `y`.
void collect(const NDArray& y, std::set<GradOp>& seen) {
  const detail::AutogradInfo* ag = y.autograd_info_if_any();
  if (!ag || !ag->node) return;
  seen.insert(ag->node->op);
  for (const NDArray& in : ag->node->inputs) collect(in, seen);
}

// Records c's forward on inputs drawn from rng and collects its ops.
void record(const Case& c, Rng& rng, std::set<GradOp>& seen) {
  std::vector<NDArray> xs;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    const auto r = i < c.ranges.size() ? c.ranges[i] : std::make_pair(-2.0f, 2.0f);
    xs.push_back(array_of(random_values(rng, shape_size(c.shapes[i]), r.first, r.second), c.shapes[i]));
    xs.back().attach_grad();
  }
  autograd::Record rec;
  collect(c.f(xs), seen);
}

}  // namespace

TEST_CASE("op table: the lists agree in size", "[optable]") {
  CHECK(sizeof(detail::kOpNames) / sizeof(detail::kOpNames[0]) ==
        detail::kUnaryOpCount + detail::kBinaryOpCount + detail::kReduceOpCount +
            detail::kOtherOpCount);
  // One gradient op per op, three per binary op (array-array, array-scalar, scalar-array).
  CHECK(grad_ops().size() == detail::kUnaryOpCount + 3 * detail::kBinaryOpCount +
                                 detail::kReduceOpCount + detail::kOtherOpCount);
}

TEST_CASE("op table: every public op has a backend conformance row", "[optable]") {
  std::vector<std::string> missing;
  for (const char* name : detail::kOpNames) {
    const std::string n = name;
    bool found = false;
    for (const OpCase& c : conformance_cases()) {
      const std::string cn = c.name;
      found = found || cn == n || cn.rfind(n + " ", 0) == 0;
    }
    if (!found) missing.push_back(n);
  }
  INFO("ops without a row in tests/conformance_cases.h (a case named \"<op> ...\")");
  CHECK(missing == std::vector<std::string>{});
}

TEST_CASE("op table: every gradient op has a gradient check", "[optable][autograd]") {
  Rng rng(test_seed("op table gradients"));
  std::set<GradOp> seen;
  leak_checked([&] {
    for (const BinaryGrad& op : binary_gradient_ops()) record(binary_case(op, {2, 3}, {3}), rng, seen);
    for (const UnaryGrad& op : unary_gradient_ops()) record(unary_case(op, {2, 3}), rng, seen);
    for (const Case& c : linalg_gradient_cases(rng)) record(c, rng, seen);
    for (int rep = 0; rep < 4; ++rep)
      for (const Case& c : reduction_gradient_cases(rng, rep)) record(c, rng, seen);
    engine().waitall();
  });
  std::vector<std::string> missing;
  for (const GradName& g : grad_ops())
    if (!seen.count(g.op)) missing.push_back(g.name);
  INFO("gradient ops that no case of tests/gradient_cases.h records");
  CHECK(missing == std::vector<std::string>{});
}
