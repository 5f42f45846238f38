// The C++ side of the JavaScript API: what bindings.cpp exposes through Embind. Arrays cross the
// boundary as integer handles (slots in a table that owns the NDArrays), so that a call costs no
// JS object allocation and a failed call leaves nothing half-made.
//
// Error protocol: no C++ exception crosses into JavaScript (it would arrive as a number, and the
// C++ frames it skipped would leak). Every function catches, stores the message (take_error) and
// returns a sentinel: -1 for handles and statuses, NaN for item, an empty string for to_string
// (then has_error() says whether it was an error). The package's JS wrapper turns that into
// `throw new Error(message)`.
//
// Threads: every function here is called from the one JavaScript thread that loaded the module
// (the browser's main thread or a Worker, or Node's main thread). Functions marked "blocking" wait
// for the engine and must not be called on a browser's main thread (the JS wrapper refuses).
#pragma once

#include <string>

#include <emscripten/val.h>

namespace asyncnd {
namespace wasm {

using emscripten::val;

// Starts the engine with `threads` CPU workers (the Web Workers that the loader pre-made).
// Returns the worker count, or -1. Call once, before anything else.
int init(int threads);
std::string backend_name();
int num_workers();

// The last error's message, as a Uint8Array view of its UTF-8 bytes in the heap (valid until
// the next error: decode it at once; cleared by the call), and whether one is pending.
emscripten::val take_error();
bool has_error();

// Handles.
int retain(int h);     // a second handle to the same array
void release(int h);   // frees the slot; the storage goes once no op uses it (never blocks)
int live_handles();

// Creation (non-blocking). `shape` is a JS array of non-negative integers.
int zeros(val shape);
int ones(val shape);
int full(val shape, float value);
int arange(double start, double stop, double step);
// `data`: a JS Float32Array (copied in) whose length equals the shape's size.
int from_array(val data, val shape);
int random_uniform(val shape, float lo, float hi);
int random_normal(val shape, float mean, float stddev);
int seed(double s);

// Elementwise (non-blocking). Codes: an op's index in its list of op_table().
int unary(int code, int h);
int binary(int code, int a, int b);
int scalar(int code, int a, float s);       // a op s
int scalar_left(int code, float s, int a);  // s op a

// Linear algebra and reductions (non-blocking): reduce_all over every element, reduce over one
// axis (negative counts from the end). Codes: op_table().reduce (reduce: where reduceHasAxis).
int dot(int a, int b);
int transpose(int h);
int reshape(int h, val shape);
int broadcast_to(int h, val shape);
int copy_to(int h);  // to the CPU, the module's only device: a copy
int reduce_all(int code, int h);
int reduce(int code, int h, int axis, bool keepdims);
// The op table's public ops by list, in op-code order: {unary, binary, reduce, other: [names],
// reduceHasAxis: [bool]}. index.cjs reads its op codes from it.
val op_table();

// Information (non-blocking).
val shape(int h);
double size(int h);

// Blocking reads.
int wait_to_read(int h);
int waitall();
// Waits for h, then returns the address of its values in wasm memory (row-major floats; valid
// until the handle is released), or -1.
double read_ptr(int h);
double item(int h);
std::string to_string(int h);

// Non-blocking read: once every queued write of h has finished (or failed), calls
// Module._asyncndReadDone(token) on this thread's event loop. Never blocks. Returns 0 or -1.
int request_read(int h, int token);

// Engine.
val stats();
int set_max_inflight(double ops, double bytes);
// Back to the bounds the engine started with (the default byte bound, or the environment's).
int reset_max_inflight();
// Sets an ASYNCND_* variable in the module's environment (which is not the process's): the Node
// loader passes ASYNCND_MAX_INFLIGHT_BYTES/_OPS before init starts the engine. Other names: -1.
int set_env(std::string name, std::string value);
int profiler_start();
// Stops profiling; the trace's UTF-8 bytes as a view of the heap (null on failure: take_error),
// valid until profiler_trace_release, which JavaScript calls once it has copied them out. Returned
// as a std::string, Embind made one more copy in the heap (51 MB for 300 000 ops).
val profiler_stop();
void profiler_trace_release();
val profiler_events();

// Resets the engine's peak bytes (stats().bytesPeak) to the bytes in use now.
int reset_peak();

// Autograd (glue_nn.cpp). Recording is per thread: the JavaScript thread's flag.
bool set_recording(bool on);  // returns the previous state
bool is_recording();
int attach_grad(int h);                            // 0 or -1
int grad(int h);                                   // a new handle to h's gradient buffer
int backward(int h, int head, bool retain_graph);  // head < 0: none (h must have one element)

// nn objects (glue_nn.cpp): ids in their own table; nn_release(id) drops the JS handle only.
int nn_dense(double units, std::string activation, bool use_bias, double in_units, int init_kind,
             float init_scale);  // init_kind: 0 uniform(scale), 1 normal(scale), 2 xavier
int nn_sequential();
int nn_add(int seq, int block);
int nn_size(int seq);
int nn_forward(int block, int x);           // an array handle (recorded inside a recording)
val nn_parameters(int block);               // a JS array of new Parameter ids, or null
int nn_dense_param(int dense, bool bias);   // a new Parameter id; -2 when there is no bias
val nn_param_info(int param);               // { name, shape, initialized } or null
int nn_param_data(int param);               // array handles
int nn_param_grad(int param);
int nn_param_set_data(int param, int h);
int nn_relu(int h);
int nn_l2loss(float weight, int pred, int label);
int nn_sgd(val params, float lr);           // params: a JS array of Parameter ids
int nn_sgd_step(int sgd, double batch_size, bool ignore_stale_grad);
int nn_sgd_set_lr(int sgd, float lr);
void nn_release(int id);
int nn_live_objects();

}  // namespace wasm
}  // namespace asyncnd
