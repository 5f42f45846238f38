// asyncnd::dist under mpiexec (ctest dist_np1, dist_np2, dist_np3): every rank runs every test
// case in the same order, so their collectives pair up. Seeded: ASYNCND_DIST_SEED reproduces.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <asyncnd/asyncnd.h>
#include <asyncnd/dist.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "comm.h"
#include "emulated_device.h"

using namespace asyncnd;

namespace {

std::uint64_t test_seed() {
  const char* s = std::getenv("ASYNCND_DIST_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20261123u;
}

// Near: relative tolerance for sums whose order MPI chooses.
bool near(float a, float b, float rel = 1e-5f) {
  return std::fabs(a - b) <= rel * std::max(1.0f, std::max(std::fabs(a), std::fabs(b)));
}

// The values rank r starts array i with: small integers, different on every rank.
std::vector<float> start_values(int r, std::size_t i, std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t e = 0; e < n; ++e)
    v[static_cast<std::size_t>(e)] = static_cast<float>((e * 7 + static_cast<std::int64_t>(i) * 3 + r * 5) % 11) - 5.0f;
  return v;
}

}  // namespace

TEST_CASE("dist: rank and size match mpiexec's") {
  const char* env = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (env) CHECK(dist::size() == std::atoi(env));
  CHECK(dist::rank() >= 0);
  CHECK(dist::rank() < dist::size());
  dist::barrier();
  REQUIRE_THROWS_WITH(dist::init(), Catch::Contains("called twice"));
}

TEST_CASE("dist: each local rank's share of the CPUs follows the affinity masks") {
  using dist::detail::rank_cpu_share;
  auto mask = [](int from, int to) {  // CPUs [from, to)
    cpu_set_t m;
    CPU_ZERO(&m);
    for (int c = from; c < to; ++c) CPU_SET(c, &m);
    return m;
  };
  const cpu_set_t all16 = mask(0, 16);
  // Unbound (mpirun --bind-to none): every rank holds every CPU.
  CHECK(rank_cpu_share(all16, {all16, all16}, 0) == 8);
  CHECK(rank_cpu_share(all16, {all16, all16, all16}, 0) == 5);  // 16 / 3, rounded down
  CHECK(rank_cpu_share(mask(0, 2), {mask(0, 2), mask(0, 2), mask(0, 2), mask(0, 2)}, 0) == 1);
  // Bound to a socket or a core each (Open MPI's defaults): each keeps its own.
  CHECK(rank_cpu_share(mask(0, 8), {mask(0, 8), mask(8, 16)}, 0) == 8);
  CHECK(rank_cpu_share(mask(3, 4), {mask(2, 3), mask(3, 4)}, 0) == 1);
  // Overlapping masks: CPUs 4-7 shared by two ranks count half to each.
  CHECK(rank_cpu_share(mask(0, 8), {mask(0, 8), mask(4, 12)}, 0) == 6);
  // A container's CPU quota is split among its ranks.
  CHECK(rank_cpu_share(all16, {all16, all16}, 4.0) == 2);
  CHECK(rank_cpu_share(all16, {all16, all16}, 1.0) == 1);  // at least one
}

TEST_CASE("dist: bad calls throw at the call, queuing nothing") {
  NDArray empty;
  REQUIRE_THROWS_WITH(dist::allreduce(empty), Catch::Contains("array is empty"));
  NDArray a = nd::ones({3});
  const std::uint64_t pushed = engine().stats().pushed;
  REQUIRE_THROWS_WITH(dist::broadcast(a, dist::size()), Catch::Contains("is not a rank"));
  REQUIRE_THROWS_WITH(dist::broadcast(a, -1), Catch::Contains("is not a rank"));
  // A value outside the enum summed, while reduce_name called it "mean".
  REQUIRE_THROWS_WITH(dist::allreduce(a, static_cast<dist::Reduce>(7)),
                      Catch::Contains("dist::allreduce: unknown Reduce 7"));
  CHECK(engine().stats().pushed == pushed);
}

// A collective writes its array in place, as += does: autograd's rules for in-place writes hold
// (autograd.h). Before, an allreduce of a recorded array went through, and backward then read
// the summed values: dy/dx came out R times too large, with no error.
TEST_CASE("dist: collectives follow autograd's rules for in-place writes") {
  NDArray x = nd::ones({3});
  x.attach_grad();
  NDArray y;
  {
    autograd::Record rec;
    y = (x * x).sum();
    REQUIRE_THROWS_WITH(dist::allreduce(x), Catch::Contains("dist_allreduce: in-place update of "
                                                            "an array that autograd is recording"));
  }
  dist::allreduce(x);  // outside the recording: allowed, and counted
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("backward: the gradient of mul reads its "
                                                    "input") &&
                                        Catch::Contains("changed in place"));
  nd::waitall();
}

// A seeded random program, the same on every rank: local ops that read and write the arrays,
// and collectives on them, all queued with no wait until the end; then every array against a
// serial reference that tracks every rank's values.
TEST_CASE("dist: collectives and local ops in flight equal a serial reference") {
  const std::uint64_t seed = test_seed();
  INFO("seed " << seed << " (ASYNCND_DIST_SEED)");
  const int R = dist::size(), me = dist::rank();
  const std::vector<std::int64_t> sizes = {1, 7, 1000, 4097, 65537, (1 << 20) + 3};
  std::vector<NDArray> arr;
  std::vector<std::vector<std::vector<float>>> ref(static_cast<std::size_t>(R));  // [rank][array]
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    for (int r = 0; r < R; ++r) ref[static_cast<std::size_t>(r)].push_back(start_values(r, i, sizes[i]));
    arr.push_back(nd::from_vector(start_values(me, i, sizes[i]), {sizes[i]}));
  }
  std::vector<NDArray> snapshots;  // arrays computed from arr right after a collective
  std::vector<std::vector<float>> snapshot_ref;
  std::mt19937_64 rng(seed);
  for (int step = 0; step < 120; ++step) {
    const std::size_t i = rng() % arr.size();
    const int kind = static_cast<int>(rng() % 6);
    auto for_each_rank = [&](auto f) {
      for (int r = 0; r < R; ++r) f(r, ref[static_cast<std::size_t>(r)][i]);
    };
    if (kind == 0) {  // local: add this rank's number
      arr[i] += static_cast<float>(me + 1);
      for_each_rank([](int r, std::vector<float>& v) { for (float& x : v) x += static_cast<float>(r + 1); });
    } else if (kind == 1) {  // local: halve
      arr[i] *= 0.5f;
      for_each_rank([](int, std::vector<float>& v) { for (float& x : v) x *= 0.5f; });
    } else if (kind == 2 || kind == 3) {  // allreduce
      const dist::Reduce op = kind == 2 ? dist::Reduce::kSum : dist::Reduce::kMean;
      dist::allreduce(arr[i], op);
      std::vector<float> total(ref[0][i].size(), 0.0f);
      for (int r = 0; r < R; ++r)
        for (std::size_t e = 0; e < total.size(); ++e) total[e] += ref[static_cast<std::size_t>(r)][i][e];
      if (op == dist::Reduce::kMean)
        for (float& x : total) x /= static_cast<float>(R);
      for_each_rank([&](int, std::vector<float>& v) { v = total; });
    } else if (kind == 4) {  // broadcast from a random root
      const int root = static_cast<int>(rng() % static_cast<unsigned>(R));
      dist::broadcast(arr[i], root);
      const std::vector<float> from = ref[static_cast<std::size_t>(root)][i];
      for_each_rank([&](int, std::vector<float>& v) { v = from; });
    } else {  // a new array read from arr[i] (ordered after the collectives before it)
      snapshots.push_back(arr[i] + 1.0f);
      std::vector<float> v = ref[static_cast<std::size_t>(me)][i];
      for (float& x : v) x += 1.0f;
      snapshot_ref.push_back(std::move(v));
    }
  }
  for (std::size_t i = 0; i < arr.size(); ++i) {
    INFO("array " << i << " of " << sizes[i] << " elements, rank " << me);
    const std::vector<float> got = arr[i].to_vector();
    const std::vector<float>& want = ref[static_cast<std::size_t>(me)][i];
    std::size_t bad = 0;
    for (std::size_t e = 0; e < got.size(); ++e) bad += near(got[e], want[e]) ? 0 : 1;
    CHECK(bad == 0);
  }
  for (std::size_t s = 0; s < snapshots.size(); ++s) {
    const std::vector<float> got = snapshots[s].to_vector();
    std::size_t bad = 0;
    for (std::size_t e = 0; e < got.size(); ++e) bad += near(got[e], snapshot_ref[s][e]) ? 0 : 1;
    CHECK(bad == 0);
  }
  CHECK(engine().stats().pending == 0);
}

TEST_CASE("dist: an MPI error becomes the op's error, rethrown at the wait") {
  NDArray a = nd::ones({5});
  dist::detail::comm_for_testing().inject_error(MPI_ERR_TRUNCATE);  // on every rank
  dist::allreduce(a);
  NDArray b = a + 1.0f;  // a dependent: skipped, inherits the error
  REQUIRE_THROWS_WITH(b.wait_to_read(),
                      Catch::Contains("dist_allreduce failed") && Catch::Contains("allreduce(sum) of [5]") &&
                          Catch::Contains("truncated"));
  // The engine and the communication thread carry on.
  NDArray c = nd::ones({5});
  dist::allreduce(c);
  CHECK(c.to_vector()[0] == static_cast<float>(dist::size()));
}

TEST_CASE("dist: with the check on, collectives that differ between ranks fail on every rank") {
  dist::detail::Comm& comm = dist::detail::comm_for_testing();
  comm.set_check(true);  // on every rank (ASYNCND_DIST_CHECK=1)
  NDArray same = nd::ones({6});
  dist::allreduce(same);
  CHECK(same.to_vector()[0] == static_cast<float>(dist::size()));
  if (dist::size() > 1) {
    // Rank 1 reduces a different size: unchecked, MPI would truncate or hang.
    NDArray a = nd::ones({dist::rank() == 1 ? 12 : 10});
    dist::allreduce(a);
    REQUIRE_THROWS_WITH(a.wait_to_read(),
                        Catch::Contains("differs between ranks") &&
                            Catch::Contains("rank 0 issues allreduce(sum) of [10] float32") &&
                            Catch::Contains("rank 1 issues allreduce(sum) of [12] float32"));
  }
  comm.set_check(false);
  dist::barrier();
}

TEST_CASE("dist: a collective skipped after a local failure still pairs up, with NaNs") {
  // Only rank 0's input fails. Rank 0 rethrows its own error; the others do not hang, and see NaN.
  NDArray a = nd::ones({4});
  if (dist::rank() == 0) {
    engine().push([] { throw Error("local failure"); }, {}, {a.var()});
  }
  dist::allreduce(a);
  if (dist::rank() == 0) {
    REQUIRE_THROWS_WITH(a.wait_to_read(), Catch::Contains("local failure"));
  } else {
    CHECK(std::isnan(a.to_vector()[0]));
  }
  dist::barrier();
}

TEST_CASE("dist: allgather_strings and stats") {
  const std::string mine(static_cast<std::size_t>(dist::rank()) * 3, 'x');
  const std::vector<std::string> all = dist::allgather_strings(mine);
  REQUIRE(all.size() == static_cast<std::size_t>(dist::size()));
  for (int r = 0; r < dist::size(); ++r) CHECK(all[static_cast<std::size_t>(r)].size() == static_cast<std::size_t>(r) * 3);
  const dist::Stats s = dist::stats();
  CHECK(s.collectives > 0);
  CHECK(s.bytes_reduced > 0);
}

namespace {

nn::Sequential small_mlp(std::int64_t features, std::int64_t hidden) {
  nn::Sequential net;
  net.add(nn::Dense(hidden, "relu", true, features));
  net.add(nn::Dense(hidden / 2, "relu", true, hidden));
  net.add(nn::Dense(1, "", true, hidden / 2));
  return net;
}

void train_step(nn::Sequential& net, const NDArray& X, const NDArray& y) {
  nn::L2Loss loss;
  NDArray l;
  {
    autograd::Record rec;
    l = loss(net(X), y).sum();
  }
  l.backward();
}

// One step's global batch: n rows of f normal features, and n normal targets.
struct Batch {
  std::vector<float> xs, ys;
};
Batch random_batch(std::mt19937& gen, std::int64_t n, std::int64_t f) {
  std::normal_distribution<float> normal;
  Batch b{std::vector<float>(static_cast<std::size_t>(n * f)), std::vector<float>(static_cast<std::size_t>(n))};
  for (float& v : b.xs) v = normal(gen);
  for (float& v : b.ys) v = normal(gen);
  return b;
}

NDArray rows(const std::vector<float>& host, std::int64_t features, std::int64_t begin, std::int64_t end) {
  std::vector<float> part(host.begin() + begin * features, host.begin() + end * features);
  return nd::from_vector(std::move(part), {end - begin, features});
}

}  // namespace

// Trains on R ranks, rank r on rows [begin_r, begin_r + shares[r]) of each global batch, and
// checks the parameters against nn::SGD on the whole batch in one process (float tolerance) and
// against rank 0's copy (bit for bit).
static void check_trainer_equals_sgd(const std::vector<std::int64_t>& shares) {
  const int me = dist::rank();
  const std::int64_t F = 16, H = 64;
  std::int64_t N = 0, b = 0;
  for (std::size_t r = 0; r < shares.size(); ++r) {
    if (static_cast<int>(r) == me) b = N;
    N += shares[r];
  }
  const std::int64_t share = shares[static_cast<std::size_t>(me)], e = b + share;
  nd::seed(1000 + static_cast<std::uint64_t>(me));  // different on every rank: the broadcast fixes it
  nn::Sequential net = small_mlp(F, H);
  nn::DistributedOptions opts;
  opts.first_bucket_bytes = 128;  // three buckets with a model this small: [b2 W2] [b1 W1] [b0 W0]
  opts.bucket_bytes = 1024;
  nn::DistributedTrainer trainer(net.parameters(), 0.05f, opts);
  REQUIRE(trainer.buckets().size() >= 3);
  CHECK(trainer.buckets()[0][0] == net.parameters().size() - 1);  // reverse order

  // The reference: one process, rank 0's initial values, the whole batch.
  nn::Sequential ref = small_mlp(F, H);
  std::vector<nn::Parameter> p = net.parameters(), q = ref.parameters();
  for (std::size_t k = 0; k < p.size(); ++k) q[k].set_data(p[k].data());
  nn::SGD ref_trainer(q, 0.05f);

  std::mt19937 gen(static_cast<unsigned>(test_seed()));
  for (int step = 0; step < 4; ++step) {
    const auto [xs, ys] = random_batch(gen, N, F);
    train_step(net, rows(xs, F, b, e), nd::from_vector(std::vector<float>(ys.begin() + b, ys.begin() + e), {share}));
    trainer.step(share);
    train_step(ref, rows(xs, F, 0, N), nd::from_vector(ys, {N}));
    ref_trainer.step(N);
  }
  for (std::size_t k = 0; k < p.size(); ++k) {
    INFO("parameter " << p[k].name() << " rank " << me);
    const std::vector<float> got = p[k].data().to_vector(), want = q[k].data().to_vector();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) bad += near(got[i], want[i], 1e-4f) ? 0 : 1;
    CHECK(bad == 0);
    // Identical on every rank, bit for bit: rank 0's copy against ours.
    NDArray root_copy = p[k].data().copy();
    dist::broadcast(root_copy, 0);
    CHECK(root_copy.to_vector() == got);
  }
}

TEST_CASE("dist: DistributedTrainer on R ranks equals SGD on the whole batch in one process") {
  const int R = dist::size();  // 96 rows: divisible by 1, 2 and 3
  check_trainer_equals_sgd(std::vector<std::int64_t>(static_cast<std::size_t>(R), 96 / R));
}

TEST_CASE("dist: DistributedTrainer with unequal shares equals SGD on the whole batch") {
  // An epoch's last batch split unevenly: 5, 12, 19 rows. Each rank dividing by its own batch
  // size made the copies drift apart after one step.
  std::vector<std::int64_t> shares;
  for (int r = 0; r < dist::size(); ++r) shares.push_back(5 + 7 * r);
  check_trainer_equals_sgd(shares);
}

// A rank that refuses its step (a batch_size that is not positive, a stale gradient) queues its
// collectives all the same, so that the others' are matched, and their updates fail: no rank
// changes a parameter, and the next step works everywhere.
static void check_refused_step(const char* why) {
  const int odd = dist::size() - 1, me = dist::rank();
  nn::Dense layer(1, "", true, 3);
  nn::DistributedTrainer trainer(layer.parameters(), 0.1f);
  const std::vector<nn::Parameter> ps = layer.parameters();
  nn::Sequential net;
  net.add(layer);
  const bool stale = std::string(why) == "stale";
  if (stale) {  // one good step first: then the odd rank steps again without a backward
    train_step(net, nd::ones({4, 3}), nd::ones({4}));
    trainer.step(4);
  }
  std::vector<std::vector<float>> before;
  for (const nn::Parameter& q : ps) before.push_back(q.data().to_vector());
  if (!(stale && me == odd)) train_step(net, nd::ones({4, 3}), nd::ones({4}));
  if (me == odd) {
    REQUIRE_THROWS_WITH(trainer.step(stale ? 4 : 0),
                        Catch::Contains("DistributedTrainer::step: ") &&
                            Catch::Contains(stale ? "was not written since this trainer was made "
                                                    "or last stepped"
                                                  : "batch_size must be positive, got 0"));
  } else {
    trainer.step(4);  // queued: its updates fail
    for (const nn::Parameter& q : ps) {
      REQUIRE_THROWS_WITH(q.data().wait_to_read(),
                          Catch::Contains("1 of " + std::to_string(dist::size()) +
                                          " ranks refused the step") &&
                              Catch::Contains("no parameter was updated"));
      CHECK_THROWS(q.grad().wait_to_read());  // the failed update wrote it too
    }
  }
  for (std::size_t k = 0; k < ps.size(); ++k) CHECK(ps[k].data().to_vector() == before[k]);
  // The collectives stayed paired: the next step works everywhere, the same on every rank.
  train_step(net, nd::ones({4, 3}), nd::ones({4}));
  trainer.step(4);
  for (std::size_t k = 0; k < ps.size(); ++k) {
    NDArray root_copy = ps[k].data().copy();
    dist::broadcast(root_copy, 0);
    CHECK(root_copy.to_vector() == ps[k].data().to_vector());
    CHECK(ps[k].data().to_vector() != before[k]);
  }
}

TEST_CASE("dist: a batch_size that is not positive on one rank fails every rank's step") {
  check_refused_step("batch");
}

TEST_CASE("dist: a stale gradient on one rank fails every rank's step") {
  // As nn::SGD: a gradient no backward wrote since the last step would be applied again.
  check_refused_step("stale");
}

TEST_CASE("dist: DistributedTrainer with parameters on a GPU goes through host memory") {
  // The emulated GPU (not host addressable, its own stream thread) takes the path a CUDA
  // device would: gradients copied to the host, packed, allreduced, copied back, updated there.
  asyncnd_test::ScopedEmulatedGpu emulated;
  const Device gpu = Device::gpu(0);
  const int R = dist::size(), me = dist::rank();
  const std::int64_t N = 48, F = 8, H = 32;
  nd::seed(2000 + static_cast<std::uint64_t>(me));  // the trainer broadcasts rank 0's values
  nn::Sequential net = small_mlp(F, H);
  for (nn::Parameter& p : net.parameters()) p.set_data(p.data().copy_to(gpu));
  nn::DistributedOptions opts;
  opts.first_bucket_bytes = 128;
  opts.bucket_bytes = 1024;
  nn::DistributedTrainer trainer(net.parameters(), 0.05f, opts);
  std::vector<nn::Parameter> p = net.parameters();
  for (const nn::Parameter& pk : p) REQUIRE(pk.data().device() == gpu);

  // The reference on the CPU, one process, the whole batch, from the broadcast values.
  nn::Sequential ref = small_mlp(F, H);
  std::vector<nn::Parameter> q = ref.parameters();
  for (std::size_t k = 0; k < p.size(); ++k) q[k].set_data(p[k].data().copy_to(Device::cpu()));
  nn::SGD ref_trainer(q, 0.05f);

  std::mt19937 gen(static_cast<unsigned>(test_seed()) + 1);
  for (int step = 0; step < 3; ++step) {
    const auto [xs, ys] = random_batch(gen, N, F);
    const std::int64_t share = N / R, b = me * share, e = b + share;
    const NDArray y = nd::from_vector(std::vector<float>(ys.begin() + b, ys.begin() + e), {share});
    train_step(net, rows(xs, F, b, e).copy_to(gpu), y.copy_to(gpu));
    trainer.step(share);
    train_step(ref, rows(xs, F, 0, N), nd::from_vector(ys, {N}));
    ref_trainer.step(N);
  }
  for (std::size_t k = 0; k < p.size(); ++k) {
    INFO("parameter " << p[k].name() << " rank " << me);
    REQUIRE(p[k].data().device() == gpu);
    const std::vector<float> got = p[k].data().copy_to(Device::cpu()).to_vector();
    const std::vector<float> want = q[k].data().to_vector();
    std::size_t bad = 0;
    for (std::size_t e = 0; e < got.size(); ++e) bad += near(got[e], want[e], 1e-4f) ? 0 : 1;
    CHECK(bad == 0);
    // The averaged gradient is what p.grad() holds afterwards, on the GPU too.
    CHECK(p[k].grad().device() == gpu);
    NDArray root_copy = p[k].data().copy_to(Device::cpu());
    dist::broadcast(root_copy, 0);
    CHECK(root_copy.to_vector() == got);
  }
}

TEST_CASE("dist: DistributedTrainer with PyTorch's default buckets") {
  nd::seed(7);
  nn::Sequential net;  // the chapter's MLP
  net.add(nn::Dense(2048, "relu", true, 512));
  net.add(nn::Dense(512, "relu", true, 2048));
  net.add(nn::Dense(1, "", true, 512));
  nn::DistributedTrainer trainer(net.parameters(), 0.005f);
  const auto buckets = trainer.buckets();
  // Reverse order; a bucket closes once it holds its cap (PyTorch's rule): the first one at the
  // 4 MB weight that takes it past 1 MB, the second at the end.
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0] == std::vector<std::size_t>{5, 4, 3, 2});
  CHECK(buckets[1] == std::vector<std::size_t>{1, 0});
  CHECK(trainer.bytes_per_step() == (2048 * 512 + 2048 + 512 * 2048 + 512 + 512 + 1) * 4);
}

TEST_CASE("dist: a parameter layout that differs between ranks throws on every rank") {
  nn::Sequential net;
  // Rank 1 has a wider hidden layer: its buckets would pair with other sizes elsewhere.
  net.add(nn::Dense(dist::rank() == 1 ? 12 : 8, "relu", true, 4));
  net.add(nn::Dense(1, "", true, dist::rank() == 1 ? 12 : 8));
  if (dist::size() == 1) {
    CHECK_NOTHROW(nn::DistributedTrainer(net.parameters(), 0.1f));
    return;
  }
  REQUIRE_THROWS_WITH(nn::DistributedTrainer(net.parameters(), 0.1f),
                      Catch::Contains("the parameters differ between ranks") &&
                          Catch::Contains("parameter 0: rank 0 has") && Catch::Contains("[8,4]") &&
                          Catch::Contains("rank 1 has") && Catch::Contains("[12,4]"));
  // Uninitialised parameters: the same on every rank, so every rank throws.
  nn::Sequential deferred;
  deferred.add(nn::Dense(4));
  REQUIRE_THROWS_WITH(nn::DistributedTrainer(deferred.parameters(), 0.1f),
                      Catch::Contains("is not initialised yet"));
}

// Arguments only one rank gets wrong: that rank threw before the layout's allgather, and the
// others waited in it until the watchdog ended the job.
TEST_CASE("dist: DistributedTrainer arguments wrong on one rank throw on every rank") {
  nn::Dense layer(2, "", true, 3);
  const int odd = dist::size() - 1;  // the last rank (rank 0 alone with one rank)
  nn::DistributedOptions o;
  if (dist::rank() == odd) o.bucket_bytes = 0;
  REQUIRE_THROWS_WITH(nn::DistributedTrainer(layer.parameters(), 0.1f, o),
                      Catch::Contains("DistributedTrainer: rank " + std::to_string(odd) +
                                      ": bucket sizes must be positive"));
  const float lr = dist::rank() == odd ? std::nanf("") : 0.1f;
  REQUIRE_THROWS_WITH(nn::DistributedTrainer(layer.parameters(), lr),
                      Catch::Contains("rank " + std::to_string(odd) +
                                      ": the learning rate must be finite, got nan"));
  std::vector<nn::Parameter> params = layer.parameters();
  if (dist::rank() == odd) params.push_back(nn::Parameter());
  REQUIRE_THROWS_WITH(nn::DistributedTrainer(params, 0.1f),
                      Catch::Contains(": empty parameter handle in the list"));

  nn::DistributedTrainer trainer(layer.parameters(), 0.1f);
  REQUIRE_THROWS_WITH(trainer.set_learning_rate(INFINITY),
                      Catch::Contains("DistributedTrainer::set_learning_rate: the learning rate "
                                      "must be finite, got inf"));
  CHECK(trainer.learning_rate() == 0.1f);
  {
    autograd::Record rec;  // a parameter is recorded in a Record: in place is refused
    REQUIRE_THROWS_WITH(trainer.step(1), Catch::Contains("DistributedTrainer::step: in-place"));
  }
  nn::DistributedTrainer moved(std::move(trainer));
  REQUIRE_THROWS_WITH(trainer.step(1), Catch::Contains("DistributedTrainer::step: this "
                                                       "DistributedTrainer was moved from"));
  REQUIRE_THROWS_WITH(trainer.buckets(), Catch::Contains("moved from"));
  CHECK(moved.bytes_per_step() == 8 * sizeof(float));
  nd::waitall();
}

TEST_CASE("dist: an allreduce runs while backward ops run (overlap, from the profiler)") {
  nd::seed(11);
  nn::Sequential net;
  net.add(nn::Dense(2048, "relu", true, 512));
  net.add(nn::Dense(512, "relu", true, 2048));
  net.add(nn::Dense(1, "", true, 512));
  nn::DistributedTrainer trainer(net.parameters(), 0.005f);
  if (dist::size() == 1) return;  // nothing to overlap with
  bool overlapped = false;
  // A fixed number of steps on every rank (stopping at the first overlap would pair one rank's
  // collectives with another's next test).
  for (int attempt = 0; attempt < 3; ++attempt) {
    NDArray X = nd::random_normal({256, 512}), y = nd::ones({256});
    nd::waitall();
    engine().start_profiling();
    nn::L2Loss loss;
    NDArray l;
    {
      autograd::Record rec;
      l = loss(net(X), y).sum();
    }
    dist::mark("backward_begin");
    l.backward();
    dist::mark("backward_end");
    trainer.step(256);
    nd::waitall();
    engine().stop_profiling();
    const dist::Overlap o =
        dist::overlap(engine().profile_events(), "backward_begin", "backward_end");
    INFO("allreduce " << o.comm_us << " us, hidden " << o.hidden_us << " us");
    CHECK(o.comm_us > 0);
    overlapped = overlapped || o.hidden_us > 0;
  }
  CHECK(overlapped);
}

int main(int argc, char** argv) {
  dist::Guard mpi(argc, argv);
  return Catch::Session().run(argc, argv);
}
