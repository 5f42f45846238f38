#!/usr/bin/env python3
"""Exit 0 when this kernel lets a process read another's memory with process_vm_readv (Linux's
cross-memory attach, CMA), else 1.

Open MPI's shared-memory transport (vader) copies a message between two ranks with one such call
where it works; where it does not (a container whose seccomp profile or ptrace rules forbid it),
the copy fails and the job breaks unless OMPI_MCA_btl_vader_single_copy_mechanism=none sends every
message through a shared buffer instead: two copies, each taking a core from the ranks' work. The
Makefile's MPI targets ask this script which to use (native/dist/README.md, "Running MPI here").
"""
import ctypes
import os
import sys


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def main():
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "process_vm_readv"):
        return 1
    src = ctypes.create_string_buffer(b"asyncnd-cma-probe", 32)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child keeps src at the same address until the parent is done
        os.close(write_end)
        os.read(read_end, 1)
        os._exit(0)
    os.close(read_end)
    try:
        dst = ctypes.create_string_buffer(32)
        local = IoVec(ctypes.cast(dst, ctypes.c_void_p), 32)
        remote = IoVec(ctypes.cast(src, ctypes.c_void_p), 32)
        n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        ok = n == 32 and dst.raw == src.raw
    finally:
        os.write(write_end, b"x")
        os.close(write_end)
        os.waitpid(pid, 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
