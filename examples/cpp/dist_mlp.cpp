// dist_mlp: the chapter's MLP (Dense 2048 relu, Dense 512 relu, Dense 1; L2 loss; SGD lr 0.005)
// trained data-parallel over MPI: a global batch of 1024 x 512, each of the N ranks training on
// 1024 / N rows of it, gradients averaged by nn::DistributedTrainer.
//
//   mpirun -np 2 ./build/example_dist_mlp                 (make demo-dist)
//   mpirun -np 2 ./build/example_dist_mlp --batches 20 --warmup 10 --trace dist_trace --bucket-mb 4
//   mpirun -H host1,host2 -np 2 ./build/example_dist_mlp  (one rank on each machine)
//
// Prints, on rank 0: time per batch, the loss, the bytes reduced, and how much of the allreduce
// time was hidden behind backward (from the profiler), over all ranks and on rank 0. --trace
// PREFIX writes one Chrome trace per rank (PREFIX_rank0.json, ...): open them in Perfetto to see
// the allreduce ops beside backward.
// --json FILE writes the figures as JSON (make bench-dist reads them).
#include <asyncnd/asyncnd.h>
#include <asyncnd/dist.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace asyncnd;

// The profiler draws an op on the worker that started it. A collective only starts there and
// runs on the communication thread meanwhile, so in the trace it would overlap the backward ops
// on that worker's track (Perfetto wants slices on one track nested): give collectives a track
// of their own. The trace has one event per line.
std::string with_comm_track(const std::string& trace) {
  const std::string kTrack = "\"tid\":1000";
  std::string out, line;
  std::istringstream in(trace);
  while (std::getline(in, line)) {
    if (line.find("\"name\":\"dist_allreduce\"") != std::string::npos ||
        line.find("\"name\":\"dist_broadcast\"") != std::string::npos) {
      const std::size_t t = line.find("\"tid\":");
      const std::size_t end = line.find(',', t);
      if (t != std::string::npos && end != std::string::npos) line.replace(t, end - t, kTrack);
    }
    out += line + "\n";
  }
  const std::size_t first = out.find("[{");  // name the track: a metadata event first
  if (first != std::string::npos)
    out.insert(first + 1, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1," + kTrack +
                              ",\"args\":{\"name\":\"communication (dist)\"}},\n");
  return out;
}

int main(int argc, char** argv) {
  dist::Guard mpi(argc, argv);  // an exception past here aborts the whole job, not just this rank
  int batches = 10, warmup = 10;
  std::string trace, json;
  nn::DistributedOptions options;  // PyTorch's buckets: 1 MB first, then 25 MB
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--batches" && i + 1 < argc) batches = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--trace" && i + 1 < argc) trace = argv[++i];
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--bucket-mb" && i + 1 < argc)
      options.bucket_bytes = static_cast<std::size_t>(std::atof(argv[++i]) * (1 << 20));
    else {
      const bool help = a == "--help" || a == "-h";
      if (dist::rank() == 0) {
        if (!help) std::fprintf(stderr, "dist_mlp: unknown or incomplete argument '%s'\n", a.c_str());
        std::fprintf(help ? stdout : stderr,
                     "usage: mpirun -np R dist_mlp [--batches N (10)] [--warmup N (10)] "
                     "[--trace PREFIX] [--json FILE] [--bucket-mb MB (25)]\n");
      }
      return help ? 0 : 2;
    }
  }
  const int rank = dist::rank(), size = dist::size();
  if (batches < 1 || warmup < 0) {
    if (rank == 0)
      std::fprintf(stderr, "dist_mlp: need --batches >= 1 and --warmup >= 0, got %d and %d\n",
                   batches, warmup);
    return 2;
  }
  const std::int64_t global_batch = 1024, features = 512;
  if (global_batch % size != 0) {
    if (rank == 0) std::fprintf(stderr, "dist_mlp: %d ranks do not divide the batch of 1024\n", size);
    return 2;
  }
  const std::int64_t local_batch = global_batch / size;

  // Every rank builds the same network; the trainer checks that, then gives every rank rank 0's
  // initial values (so the seed need not match).
  nd::seed(42 + static_cast<std::uint64_t>(rank));
  nn::Sequential net;
  net.add(nn::Dense(2048, "relu", true, features));
  net.add(nn::Dense(512, "relu", true, 2048));
  net.add(nn::Dense(1, "", true, 512));
  nn::DistributedTrainer trainer(net.parameters(), 0.005f, options);
  nn::L2Loss loss;
  // This rank's share of each global batch: the chapter's data, different on every rank, made
  // before the clock starts, as a loader would have it ready. Made inside the timed loop, every
  // batch's random_normal would be queued at once and run between the first steps' ops (nothing
  // orders them): those steps took 3x as long, each rank at other times, and the ranks' waits
  // for each other swamped the overlap figure.
  nn::DataIter data(warmup + batches, local_batch, features);
  std::vector<nn::Batch> ready;
  for (nn::Batch b; data.next(b);) ready.push_back(b);

  auto train_one = [&](const nn::Batch& b) {
    NDArray l;
    {
      autograd::Record rec;
      l = loss(net(b.X), b.y).sum();
    }
    dist::mark("backward_begin");
    l.backward();
    dist::mark("backward_end");
    trainer.step(local_batch);
    return l;
  };

  // Warm-up, queued like the timed loop: the engine's in-flight bound lets the frontend run a few
  // batches ahead, and the memory of those batches is touched for the first time here. On our VMs
  // a first touch costs ~10 us per 4 KiB page (half the time went to the kernel): timed, the
  // first 7 batches took 3x as long as the rest, until the caching allocator held them all.
  for (int i = 0; i < warmup; ++i) train_one(ready[static_cast<std::size_t>(i)]);
  nd::waitall();
  dist::barrier();
  const dist::Stats s0 = dist::stats();
  engine().start_profiling();
  const auto t0 = std::chrono::steady_clock::now();
  NDArray l;
  for (int i = warmup; i < warmup + batches; ++i) l = train_one(ready[static_cast<std::size_t>(i)]);
  const float local_loss = l.item() / static_cast<float>(local_batch);  // waits for this rank
  nd::waitall();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string trace_json = engine().stop_profiling();
  const dist::Stats s1 = dist::stats();
  const dist::Overlap o = dist::overlap(engine().profile_events(), "backward_begin", "backward_end");
  if (!trace.empty()) {
    std::ofstream(trace + "_rank" + std::to_string(rank) + ".json") << with_comm_track(trace_json);
  }

  // The loss over the global batch: the mean of the ranks' losses. And every rank's overlap: a
  // rank that runs ahead waits inside its allreduces for the others, so one rank's share alone
  // swings with which rank leads; the job's share sums the ranks' hidden and allreduce times.
  NDArray lv = nd::full({1}, local_loss);
  dist::allreduce(lv, dist::Reduce::kMean);
  NDArray ov = nd::from_vector({static_cast<float>(o.hidden_us), static_cast<float>(o.comm_us)}, {2});
  dist::allreduce(ov, dist::Reduce::kSum);
  const float global_loss = lv.item();
  const std::vector<float> job = ov.to_vector();
  const double job_fraction = job[1] > 0 ? job[0] / job[1] : 0.0;
  if (rank == 0) {
    const double per_batch = seconds / batches;
    const double mb = static_cast<double>(s1.bytes_reduced - s0.bytes_reduced) / 1e6;
    std::printf("dist_mlp: %d rank(s), global batch %lld x %lld (%lld per rank), %d batches\n", size,
                static_cast<long long>(global_batch), static_cast<long long>(features),
                static_cast<long long>(local_batch), batches);
    std::printf("  time per batch   %.1f ms\n", per_batch * 1e3);
    std::printf("  loss             %.4f (last batch, mean over the global batch)\n", global_loss);
    std::printf("  bytes reduced    %.1f MB (%.1f MB per batch, %zu buckets)\n", mb, mb / batches,
                trainer.buckets().size());
    std::printf("  allreduce time   %.1f ms per batch and rank, %.0f%% of it hidden behind backward "
                "(rank 0: %.1f ms, %.0f%%)\n",
                job[1] / 1e3 / batches / size, 100.0 * job_fraction, o.comm_us / 1e3 / batches,
                100.0 * o.fraction());
    if (!trace.empty()) std::printf("  traces           %s_rank*.json\n", trace.c_str());
    if (!json.empty()) {
      std::ofstream(json) << "{\"ranks\": " << size << ", \"step_s\": " << per_batch
                          << ", \"overlap_fraction\": " << job_fraction
                          << ", \"overlap_fraction_rank0\": " << o.fraction()
                          << ", \"allreduce_ms_per_step\": " << job[1] / 1e3 / batches / size
                          << ", \"loss\": " << global_loss << "}\n";
    }
  }
  return 0;
}
