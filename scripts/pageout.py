#!/usr/bin/env python3
"""Pages a process's file-backed mappings out (process_madvise MADV_PAGEOUT, Linux >= 5.10).

Usage: scripts/pageout.py PID

What a memory-pressed kernel does to a process's clean file pages (its binary's code and
read-only data), done now: the RSS read after it, and after some traffic, is the process's
working set rather than every page it ever touched (startup code, policy parsing, the
tokenizer's tables). Used by `bench_loopback memory --pageout`. Needs CAP_SYS_NICE and
ptrace access to PID (root, or the same user with ptrace allowed); exits 1 otherwise.
"""
import ctypes
import sys

SYS_PIDFD_OPEN = 434
SYS_PROCESS_MADVISE = 440
MADV_PAGEOUT = 21


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def main() -> int:
    pid = int(sys.argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        print(f"pidfd_open({pid}): errno {ctypes.get_errno()}", file=sys.stderr)
        return 1
    advised = 0
    failed = 0
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or not fields[5].startswith("/"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            iov = IoVec(start, end - start)
            done = libc.syscall(SYS_PROCESS_MADVISE, pidfd, ctypes.byref(iov), 1, MADV_PAGEOUT, 0)
            if done < 0:
                failed += 1
            else:
                advised += done
    if advised == 0:
        print(f"process_madvise: nothing paged out ({failed} ranges refused, errno {ctypes.get_errno()})",
              file=sys.stderr)
        return 1
    print(f"{advised} bytes of file-backed mappings advised out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
