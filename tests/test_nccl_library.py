"""The library itself: the real libnccl from the nvidia-nccl-cu12 wheel asked in a child
process, libraries that crash or hang when loaded, and which copy ld.so picks.

The crashing and hanging "libnccl"s and the stand-in copies are tiny C libraries gcc builds
here (tests/plugins); everything else is the real wheel and the real dynamic loader.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ncclcheck.context import ProbeContext
from ncclcheck.model import Status
from ncclcheck.ncclib.discovery import discover
from ncclcheck.ncclib.loader import ask_library
from ncclcheck.ncclib.search import resolve
from ncclcheck.ncclib.version import NcclVersion
from ncclcheck.probes import family, run_family
from ncclcheck.probes.nccl.library import check_answer, check_library
from plugins.build import gcc

WHEEL_VERSION = importlib.metadata.version("nvidia-nccl-cu12")


def wheel_library() -> str:
    found = discover({}, cache={})
    assert found.resolution.found, "the nvidia-nccl-cu12 wheel must be installed (scripts/test.sh)"
    return found.resolution.found


def by_id(results, cid):
    return next(r for r in results if r.id == cid)


def test_real_library_version_and_error_strings():
    answer = ask_library(wheel_library(), {"PATH": "/usr/bin:/bin"}, timeout=30)
    assert answer.outcome == "ok", answer
    assert str(answer.version) == WHEEL_VERSION.split(".post")[0]
    assert answer.loaded_paths == [str(Path(wheel_library()).resolve())]
    strings = answer.error_strings
    assert strings[0] == "no error"
    assert strings[4].startswith("invalid argument")
    assert strings[5].startswith("invalid usage")
    assert strings[6] == "remote process exited or there was a network error"
    assert answer.bootstrap is not None and answer.bootstrap.rc == 0


def test_nccl_family_on_the_real_library():
    results = run_family(family("nccl"), ProbeContext(env={"PATH": "/usr/bin:/bin"}, timeout=60))
    version = by_id(results, "nccl.version")
    assert version.status == Status.PASS and version.details["version"] == WHEEL_VERSION
    assert by_id(results, "nccl.load").details["error_strings"]["0"] == "no error"
    library = by_id(results, "nccl.library")
    assert library.details["loaded"] == wheel_library()
    assert library.details["wheel"] == f"nvidia-nccl-cu12 {WHEEL_VERSION}"


@pytest.mark.parametrize("flags,signal_name", [((), "SIGABRT"), (("-DCRASH_SEGV",), "SIGSEGV")])
def test_library_that_crashes_on_load_is_an_error(tmp_path, flags, signal_name):
    lib = gcc("crash_nccl.c", tmp_path / "libnccl.so.2", *flags)
    answer = ask_library(str(lib), {}, timeout=20)
    assert answer.outcome == "crashed" and answer.signal == signal_name
    result = check_answer(answer, discover({}, str(lib), cache={}), 20)[0]
    assert result.status == Status.ERROR and result.id == "nccl.load"
    assert signal_name in result.summary and "while loading" in result.summary


def test_library_that_hangs_on_load_is_an_error_within_the_deadline(tmp_path):
    lib = gcc("hang_nccl.c", tmp_path / "libnccl.so.2")
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "ncclcheck", "nccl", "--nccl-lib", str(lib), "--format", "json",
         "--timeout", "8"], capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    report = json.loads(completed.stdout)
    load = next(c for c in report["checks"] if c["id"] == "nccl.load")
    assert load["status"] == "error" and "did not answer" in load["summary"]
    assert completed.returncode == 1
    assert elapsed < 30, f"took {elapsed:.1f} s with --timeout 8"
    assert not subprocess.run(["pgrep", "-f", str(lib)], capture_output=True).stdout


def test_old_version_encoding_through_the_loader(tmp_path):
    lib = gcc("fake_nccl.c", tmp_path / "libnccl.so.2", "-DVERSION_CODE=2804")
    answer = ask_library(str(lib), {}, timeout=20)
    assert answer.outcome == "ok" and answer.version == NcclVersion(2, 8, 4)


def test_file_that_is_not_a_library_is_an_error(tmp_path):
    lib = tmp_path / "libnccl.so.2"
    lib.write_text("not a library\n")
    answer = ask_library(str(lib), {}, timeout=20)
    assert answer.outcome == "load_error"
    result = check_answer(answer, discover({}, str(lib), cache={}), 20)[0]
    assert result.status == Status.ERROR and "does not load" in result.summary


@pytest.fixture
def two_copies(tmp_path):
    """Copy A (2.18.3) next to a requester, copy B (2.20.5) elsewhere."""
    a = gcc("fake_nccl.c", tmp_path / "a" / "libnccl.so.2", "-Wl,-soname,libnccl.so.2",
            "-DVERSION_CODE=21803", '-DBANNER="2.18.3+cuda12.2"')
    b = gcc("fake_nccl.c", tmp_path / "b" / "libnccl.so.2", "-Wl,-soname,libnccl.so.2",
            "-DVERSION_CODE=22005", '-DBANNER="2.20.5+cuda12.4"')
    return a, b


def real_loader_choice(requester: Path, env: dict[str, str]) -> str:
    """Which libnccl the real ld.so maps when ``requester`` is loaded."""
    code = ("import ctypes; ctypes.CDLL(%r); print([l.split()[-1] for l in open('/proc/self/maps')"
            " if 'libnccl' in l][0])" % str(requester))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=30, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("dtags,winner", [("--disable-new-dtags", "a"), ("--enable-new-dtags", "b")])
def test_search_order_matches_the_real_loader(tmp_path, two_copies, dtags, winner):
    """DT_RPATH beats LD_LIBRARY_PATH; DT_RUNPATH loses to it - as ld.so(8) says and does."""
    a, b = two_copies
    requester = gcc("requester.c", tmp_path / "libtorch_cuda.so", f"-L{a.parent}",
                    "-l:libnccl.so.2", f"-Wl,{dtags},-rpath,$ORIGIN/a")
    env = {"LD_LIBRARY_PATH": str(b.parent), "PATH": "/usr/bin:/bin"}
    predicted = resolve("libnccl.so.2", requester, env, cache={})
    actual = real_loader_choice(requester, env)
    assert Path(predicted.found).resolve() == Path(actual).resolve()
    assert Path(actual).parent.name == winner
    assert predicted.how.startswith("DT_RPATH" if winner == "a" else "LD_LIBRARY_PATH")


def test_ld_preload_beats_everything(tmp_path, two_copies):
    a, b = two_copies
    requester = gcc("requester.c", tmp_path / "libtorch_cuda.so", f"-L{a.parent}",
                    "-l:libnccl.so.2", "-Wl,--disable-new-dtags,-rpath,$ORIGIN/a")
    env = {"LD_PRELOAD": str(b), "PATH": "/usr/bin:/bin"}
    predicted = resolve("libnccl.so.2", requester, env, cache={})
    assert predicted.how == "LD_PRELOAD"
    assert Path(real_loader_choice(requester, env)).resolve() == b.resolve()


def test_torch_copy_and_system_copy_differing_is_a_warning(tmp_path, two_copies):
    """A fake site-packages with a CUDA torch layout (torch/lib/libtorch_cuda.so with the
    wheels' DT_RPATH) and the nvidia wheel's copy, plus a different copy on LD_LIBRARY_PATH."""
    a, b = two_copies
    site = tmp_path / "site"
    wheel_copy = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    wheel_copy.parent.mkdir(parents=True)
    wheel_copy.write_bytes(a.read_bytes())
    gcc("requester.c", site / "torch" / "lib" / "libtorch_cuda.so", f"-L{a.parent}",
        "-l:libnccl.so.2", "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../../nvidia/nccl/lib")
    found = discover({"LD_LIBRARY_PATH": str(b.parent)}, search_path=[str(site)], cache={},
                     extra_dirs=())
    assert Path(found.resolution.found).resolve() == wheel_copy.resolve()
    assert found.torch.requester is not None and not found.torch.simulated
    result = check_library(found)
    assert result.status == Status.WARN and result.category.value == "version_mismatch"
    assert "2.20.5" in result.summary and "2.18.3" in result.summary
    assert {c["version"] for c in result.details["copies"]} == {"2.18.3", "2.20.5"}
    # The loaded file, reached through torch/lib/../../nvidia, is named once and plainly (a
    # GPU node's report once listed it again among the "other copies").
    assert "/../" not in result.summary
    assert result.summary.count("libnccl.so.2") == 2
    assert result.summary.split("other copies differ: ")[1].startswith(str(b))


def test_same_version_copies_pass(tmp_path, two_copies):
    a, _ = two_copies
    found = discover({"LD_LIBRARY_PATH": str(a.parent)}, search_path=[], cache={}, extra_dirs=())
    result = check_library(found)
    assert result.status == Status.PASS and found.resolution.how == "LD_LIBRARY_PATH"


def test_cli_nccl_lib_override(tmp_path):
    lib = gcc("fake_nccl.c", tmp_path / "libnccl.so.2", "-DVERSION_CODE=22103",
              '-DBANNER="2.21.3+cuda12.4"')
    completed = subprocess.run(
        [sys.executable, "-m", "ncclcheck", "nccl", "--nccl-lib", str(lib), "--format", "json"],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "NCCL_VERSION": "2.21.3-1"})
    report = json.loads(completed.stdout)
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["nccl.library"]["details"]["found_via"] == "--nccl-lib"
    assert checks["nccl.version"]["details"]["version"] == "2.21.3"
    assert checks["nccl.setting.NCCL_VERSION"]["status"] == "pass"


def test_cli_nccl_lib_missing_is_usage_error(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "ncclcheck", "nccl", "--nccl-lib", str(tmp_path / "none.so")],
        capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert len(completed.stderr.strip().splitlines()) == 1 and "Traceback" not in completed.stderr
