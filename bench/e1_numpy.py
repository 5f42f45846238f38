#!/usr/bin/env python3
"""The chapter's E1 in NumPy (float64, as the chapter runs it): 10 x (normal 1000x1000, dot).

NumPy computes before returning, so this is the synchronous baseline that bench_native compares
the engine with (e1_numpy_s). Run with Debian's Python, which has NumPy:
    /usr/bin/python3 bench/e1_numpy.py [repeats]
Prints one line, the median seconds of the repeats, after a warm-up; nothing else on stdout.
"""
import statistics
import sys
import time

import numpy as np


def e1():
    for _ in range(10):
        a = np.random.normal(size=(1000, 1000))
        b = np.dot(a, a)
    return b


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    e1()  # warm-up: BLAS threads and buffers
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        e1()
        times.append(time.perf_counter() - t0)
    print(f"{statistics.median(times):.6f}")
    print(f"numpy {np.__version__}, repeats {[round(t, 4) for t in times]}", file=sys.stderr)


if __name__ == "__main__":
    main()
