"""Ask the real libnccl (nvidia-nccl-cu12 wheel) for a unique id: this runs NCCL's bootstrap
network setup, which needs no GPU, so interface and NCCL_COMM_ID failures are NCCL's own."""

import ctypes
import glob
import os
import sys

import nvidia.nccl

lib_dir = os.path.join(list(nvidia.nccl.__path__)[0], "lib")
lib = ctypes.CDLL(sorted(glob.glob(os.path.join(lib_dir, "libnccl.so*")))[0])
lib.ncclGetErrorString.restype = ctypes.c_char_p
lib.ncclGetLastError.restype = ctypes.c_char_p
version = ctypes.c_int()
lib.ncclGetVersion(ctypes.byref(version))
unique_id = ctypes.create_string_buffer(128)
result = lib.ncclGetUniqueId(unique_id)
if result != 0:
    code = version.value
    text = f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    print(f"RuntimeError: NCCL error: {lib.ncclGetErrorString(result).decode()}, NCCL version {text}",
          file=sys.stderr)
    print(f"Last error:\n{lib.ncclGetLastError(None).decode()}", file=sys.stderr)
    sys.exit(1)
print("unique id created", flush=True)
