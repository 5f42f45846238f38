// The JavaScript API's autograd and nn (glue.h): recording on the JavaScript thread, gradients of
// array handles, and a second handle table for nn objects (layers, parameters, trainers). Each
// nn object is a value-semantic C++ handle (nn.h), so releasing a JS handle never frees what a
// network or trainer still uses: the storage goes with the last C++ handle.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "glue.h"
#include "glue_internal.h"

namespace asyncnd {
namespace wasm {
namespace {

enum class Kind { kDense, kSequential, kParameter, kSGD };

struct Object {
  Kind kind;
  nn::Block block;      // kDense, kSequential
  nn::Sequential seq;   // kSequential
  // kDense. Made only for a Dense: a placeholder Dense in every object took a layer number, and
  // the first layer a script made was dense1, not Gluon's dense0.
  std::optional<nn::Dense> dense;
  nn::Parameter param;  // kParameter
  std::shared_ptr<nn::SGD> sgd;
};

std::vector<std::unique_ptr<Object>> g_objects;
std::vector<int> g_free_objects;
int g_live_objects = 0;

int put_object(std::unique_ptr<Object> o) {
  if (!g_free_objects.empty()) {
    const int id = g_free_objects.back();
    g_free_objects.pop_back();
    g_objects[static_cast<std::size_t>(id)] = std::move(o);
    ++g_live_objects;
    return id;
  }
  // nn_release must not allocate (as glue.cpp's release): room in the free list comes first.
  if (g_free_objects.capacity() < g_objects.size() + 1) {
    g_free_objects.reserve(2 * g_objects.size() + 16);
  }
  g_objects.push_back(std::move(o));
  ++g_live_objects;
  return static_cast<int>(g_objects.size()) - 1;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kDense: return "Dense";
    case Kind::kSequential: return "Sequential";
    case Kind::kParameter: return "Parameter";
    case Kind::kSGD: return "SGD";
  }
  return "?";
}

Object& object(int id, const char* op) {
  if (id < 0 || static_cast<std::size_t>(id) >= g_objects.size() || !g_objects[static_cast<std::size_t>(id)])
    throw Error(std::string(op) + ": nn object " + std::to_string(id) + " is not live (deleted?)");
  return *g_objects[static_cast<std::size_t>(id)];
}

Object& object_of(int id, Kind kind, const char* op) {
  Object& o = object(id, op);
  if (o.kind != kind)
    throw Error(std::string(op) + ": expected a " + kind_name(kind) + ", got a " + kind_name(o.kind));
  return o;
}

const nn::Block& block_of(int id, const char* op) {
  Object& o = object(id, op);
  if (o.kind != Kind::kDense && o.kind != Kind::kSequential)
    throw Error(std::string(op) + ": expected a layer (Dense or Sequential), got a " + kind_name(o.kind));
  return o.block;
}

int put_parameter(const nn::Parameter& p) {
  auto o = std::make_unique<Object>();
  o->kind = Kind::kParameter;
  o->param = p;
  return put_object(std::move(o));
}

std::int64_t positive_int(double v, const char* op, const char* what, bool allow_zero) {
  if (!std::isfinite(v) || v != std::floor(v) || v < (allow_zero ? 0 : 1) || v > 9007199254740991.0)
    throw Error(std::string(op) + ": " + what + " must be a " + (allow_zero ? "non-negative" : "positive") +
                " integer, got " + std::to_string(v));
  return static_cast<std::int64_t>(v);
}

}  // namespace

bool set_recording(bool on) { return autograd::set_recording(on); }
bool is_recording() { return autograd::is_recording(); }

int attach_grad(int h) {
  return guarded(
      [&] {
        // attach_grad marks the array itself (every handle to it), so a const handle will do.
        NDArray a = get(h);
        a.attach_grad();
        return 0;
      },
      -1);
}

int grad(int h) {
  return make([&] { return get(h).grad(); });
}

int backward(int h, int head, bool retain_graph) {
  return guarded(
      [&] {
        const NDArray& y = get(h);
        if (head < 0) {
          if (retain_graph) {
            autograd::backward(y, NDArray(), true);
          } else {
            y.backward();
          }
        } else {
          y.backward(get(head), retain_graph);
        }
        return 0;
      },
      -1);
}

int nn_dense(double units, std::string activation, bool use_bias, double in_units, int init_kind,
             float init_scale) {
  return guarded(
      [&] {
        const std::int64_t u = positive_int(units, "nn.Dense", "units", false);
        const std::int64_t in = positive_int(in_units, "nn.Dense", "inUnits", true);
        nn::Init init;
        switch (init_kind) {
          case 0: init = nn::Init::uniform(init_scale); break;
          case 1: init = nn::Init::normal(init_scale); break;
          case 2: init = nn::Init::xavier(); break;
          default: throw Error("nn.Dense: unknown init kind " + std::to_string(init_kind));
        }
        auto o = std::make_unique<Object>();
        o->kind = Kind::kDense;
        o->dense.emplace(u, activation, use_bias, in, init);
        o->block = *o->dense;
        return put_object(std::move(o));
      },
      -1);
}

int nn_sequential() {
  return guarded(
      [] {
        auto o = std::make_unique<Object>();
        o->kind = Kind::kSequential;
        o->block = o->seq;
        return put_object(std::move(o));
      },
      -1);
}

int nn_add(int seq, int block) {
  return guarded(
      [&] {
        Object& s = object_of(seq, Kind::kSequential, "Sequential.add");
        const nn::Block& b = block_of(block, "Sequential.add");
        if (seq == block) throw Error("Sequential.add: a network cannot contain itself");
        s.seq.add(b);
        return 0;
      },
      -1);
}

int nn_size(int seq) {
  return guarded(
      [&] { return static_cast<int>(object_of(seq, Kind::kSequential, "Sequential.size").seq.size()); },
      -1);
}

int nn_forward(int block, int x) {
  return make([&] { return block_of(block, "forward")(get(x)); });
}

val nn_parameters(int block) {
  return guarded(
      [&] {
        val out = val::array();
        for (const nn::Parameter& p : block_of(block, "parameters").parameters())
          out.call<void>("push", put_parameter(p));
        return out;
      },
      val::null());
}

int nn_dense_param(int dense, bool bias) {
  return guarded(
      [&] {
        const Object& o = object_of(dense, Kind::kDense, bias ? "Dense.bias" : "Dense.weight");
        const nn::Parameter p = bias ? o.dense->bias() : o.dense->weight();
        return p.defined() ? put_parameter(p) : -2;  // -2: no bias (not an error)
      },
      -1);
}

val nn_param_info(int param) {
  return guarded(
      [&] {
        const nn::Parameter& p = object_of(param, Kind::kParameter, "Parameter").param;
        val o = val::object();
        o.set("name", p.name());
        val shape = val::array();
        for (std::int64_t d : p.shape()) shape.call<void>("push", static_cast<double>(d));
        o.set("shape", shape);
        o.set("initialized", p.initialized());
        return o;
      },
      val::null());
}

int nn_param_data(int param) {
  return make([&] { return object_of(param, Kind::kParameter, "Parameter.data").param.data(); });
}

int nn_param_grad(int param) {
  return make([&] { return object_of(param, Kind::kParameter, "Parameter.grad").param.grad(); });
}

int nn_param_set_data(int param, int h) {
  return guarded(
      [&] {
        object_of(param, Kind::kParameter, "Parameter.setData").param.set_data(get(h));
        return 0;
      },
      -1);
}

int nn_relu(int h) {
  return make([&] { return nn::relu(get(h)); });
}

int nn_l2loss(float weight, int pred, int label) {
  return make([&] { return nn::L2Loss(weight)(get(pred), get(label)); });
}

int nn_sgd(val params, float lr) {
  return guarded(
      [&] {
        if (!params.isArray()) throw Error("nn.SGD: params must be an array of Parameters");
        if (!std::isfinite(lr)) throw Error("nn.SGD: the learning rate must be finite, got " + std::to_string(lr));
        std::vector<nn::Parameter> ps;
        const unsigned n = params["length"].as<unsigned>();
        for (unsigned i = 0; i < n; ++i)
          ps.push_back(object_of(params[i].as<int>(), Kind::kParameter, "nn.SGD").param);
        auto o = std::make_unique<Object>();
        o->kind = Kind::kSGD;
        o->sgd = std::make_shared<nn::SGD>(std::move(ps), lr);
        return put_object(std::move(o));
      },
      -1);
}

int nn_sgd_step(int sgd, double batch_size, bool ignore_stale_grad) {
  return guarded(
      [&] {
        nn::SGD& t = *object_of(sgd, Kind::kSGD, "SGD.step").sgd;
        if (!std::isfinite(batch_size) || batch_size != std::floor(batch_size))
          throw Error("SGD.step: batch size must be an integer, got " + std::to_string(batch_size));
        t.step(static_cast<std::int64_t>(batch_size), ignore_stale_grad);
        return 0;
      },
      -1);
}

int nn_sgd_set_lr(int sgd, float lr) {
  return guarded(
      [&] {
        if (!std::isfinite(lr)) throw Error("SGD.learningRate: must be finite, got " + std::to_string(lr));
        object_of(sgd, Kind::kSGD, "SGD.learningRate").sgd->set_learning_rate(lr);
        return 0;
      },
      -1);
}

void nn_release(int id) {
  if (id < 0 || static_cast<std::size_t>(id) >= g_objects.size() || !g_objects[static_cast<std::size_t>(id)])
    return;
  g_objects[static_cast<std::size_t>(id)].reset();  // arrays go once no other handle or op uses them
  g_free_objects.push_back(id);
  --g_live_objects;
}

int nn_live_objects() { return g_live_objects; }

}  // namespace wasm
}  // namespace asyncnd
