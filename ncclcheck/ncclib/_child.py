"""Runs in a child process: load one libnccl and ask it what only it knows.

Usage: python -I _child.py LIBRARY RESULT_FD. Each answer is one JSON line on RESULT_FD as soon
as it is known, so when the library crashes or hangs half-way the parent still has the earlier
answers. NCCL's own log goes to stdout/stderr, which the parent reads separately. Standard
library only: this file must not import ncclcheck (the child may run in a bare interpreter).
"""

import ctypes
import json
import os
import sys

ERROR_CODES = range(10)  # ncclSuccess .. ncclTimeout, then one past the end


def say(**answer) -> None:
    os.write(int(sys.argv[2]), (json.dumps(answer) + "\n").encode())


def main() -> None:
    library = sys.argv[1]
    say(stage="start", pid=os.getpid())
    try:
        lib = ctypes.CDLL(library)
    except OSError as exc:
        say(stage="load_error", error=str(exc))
        return
    say(stage="loaded", maps=sorted({line.split()[-1] for line in open("/proc/self/maps")
                                     if "libnccl" in line and "/" in line}))
    version = ctypes.c_int(0)
    rc = lib.ncclGetVersion(ctypes.byref(version))
    say(stage="version", rc=rc, code=version.value)
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    lib.ncclGetErrorString.argtypes = [ctypes.c_int]
    strings = {str(i): (lib.ncclGetErrorString(i) or b"").decode("utf-8", "replace")
               for i in ERROR_CODES}
    say(stage="errors", strings=strings)
    unique_id = ctypes.create_string_buffer(128)  # ncclUniqueId is 128 bytes
    sys.stdout.flush()
    rc = lib.ncclGetUniqueId(unique_id)
    last = ""
    if hasattr(lib, "ncclGetLastError"):
        lib.ncclGetLastError.restype = ctypes.c_char_p
        lib.ncclGetLastError.argtypes = [ctypes.c_void_p]
        last = (lib.ncclGetLastError(None) or b"").decode("utf-8", "replace")
    say(stage="unique_id", rc=rc, last_error=last)


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # e.g. a "libnccl" without ncclGetVersion
        say(stage="exception", error=f"{type(exc).__name__}: {exc}")
    finally:
        libc = ctypes.CDLL(None)
        libc.fflush(None)  # NCCL logs through C stdio; flush before the fast exit
        os._exit(0)  # NCCL's bootstrap thread must not keep the child alive
