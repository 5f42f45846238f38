#!/usr/bin/env python3
"""The peer a user would pick instead: PyTorch eager on the CPU, on the chapter's E5 and E6.

Debian's python3-torch (1.13; `make bench` installs it) uses the same OpenBLAS as asyncnd, so the
comparison is of the frameworks, not of the GEMM kernels; the core OpenBLAS loaded is printed.
Run with Debian's Python:
    /usr/bin/python3 bench/torch_peer.py THREADS [--e5]
Prints, one per line, `key value` for: torch_e5_step_us (10 000 x `y = x + 1` on a [1, 2] tensor,
per step, median of 5), torch_e6_sync_s (the chapter's MLP: Dense 2048 relu, Dense 512 relu,
Dense 1, L2 loss, SGD lr 0.005, 100 batches of 1024x512, reading the loss each batch; not with
--e5, which `bench_native --only=overhead` passes), and the OpenBLAS core (as a comment line).
THREADS: torch.set_num_threads, the same as asyncnd's BLAS.

On a machine with an NVIDIA GPU, bench_gpu runs it with the Python that has a CUDA PyTorch:
    python3 bench/torch_peer.py --cuda
which prints torch_cuda_e5_sync_step_us and torch_cuda_e5_async_step_us (the same 10 000 steps on
the GPU, torch.cuda.synchronize() after each step, or once after the loop; per step, median of 5)
and torch_cuda_e6_sync_s (the MLP on the GPU, reading the loss each batch).
"""
import ctypes
import statistics
import sys
import time

import torch


def blas_core():
    # The OpenBLAS this process mapped when torch was imported (Debian's torch reaches it through
    # libblas.so.3), not one loaded here for the question: that would answer even for a PyTorch
    # with a BLAS of its own.
    try:
        with open("/proc/self/maps") as maps:
            mapped = sorted({line.split()[-1] for line in maps if "libopenblas" in line})
    except OSError:
        mapped = []
    if not mapped:
        return "none mapped (this PyTorch does not use OpenBLAS)"
    try:
        lib = ctypes.CDLL(mapped[0])
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode() + " (" + mapped[0] + ")"
    except (OSError, AttributeError):
        return "unknown (" + mapped[0] + ")"


def e5_step_us(n=10000, device="cpu", sync_each=False):
    x = torch.ones((1, 2), device=device)
    cuda = device != "cpu"
    for _ in range(1000):  # warm-up: allocator, kernels loaded
        y = x + 1
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            y = x + 1
            if sync_each:
                torch.cuda.synchronize()
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / n * 1e6)
    del y
    return statistics.median(times)


def e6_sync_s(batches=100, batch=1024, features=512, device="cpu"):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(features, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 1)).to(device)
    loss_fn = torch.nn.MSELoss(reduction="none")  # per-example, like Gluon's L2Loss (times 2)
    # Gluon's trainer.step(batch) divides the summed gradient by the batch size; so does this lr.
    trainer = torch.optim.SGD(net.parameters(), lr=0.005 / batch)

    def step(X, y):
        trainer.zero_grad()
        l = loss_fn(net(X), y) / 2
        l.backward(torch.ones_like(l))
        trainer.step()
        return l

    def data():
        return (torch.randn(batch, features, device=device),
                torch.randn(batch, 1, device=device))

    X, y = data()
    step(X, y).mean().item()  # warm-up: allocations, BLAS threads
    t0 = time.perf_counter()
    for _ in range(batches):
        X, y = data()
        step(X, y).mean().item()  # the synchronising read of each batch
    return time.perf_counter() - t0


def main_cuda():
    if not torch.cuda.is_available():
        print(f"# torch {torch.__version__} sees no CUDA device")
        sys.exit(1)
    # Plain FP32 (no TF32), as asyncnd's cuBLAS calls.
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"# torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name(0)}")
    print(f"torch_cuda_e5_sync_step_us {e5_step_us(device='cuda', sync_each=True):.4f}")
    print(f"torch_cuda_e5_async_step_us {e5_step_us(device='cuda'):.4f}")
    print(f"torch_cuda_e6_sync_s {e6_sync_s(device='cuda'):.4f}")


def main():
    if sys.argv[1:] == ["--cuda"]:
        main_cuda()
        return
    args = sys.argv[1:]
    e5_only = "--e5" in args
    args = [a for a in args if a != "--e5"]
    threads = int(args[0]) if args else 2
    torch.set_num_threads(threads)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"OpenBLAS core {blas_core()}")
    print(f"torch_e5_step_us {e5_step_us():.4f}")
    if not e5_only:
        print(f"torch_e6_sync_s {e6_sync_s():.4f}")


if __name__ == "__main__":
    main()
