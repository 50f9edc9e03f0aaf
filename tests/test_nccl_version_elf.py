"""Version codes and labels, and the ELF reader on objects gcc builds here."""

from __future__ import annotations

import pytest

from ncclcheck.ncclib.elf import ElfError, ElfFile, read_dynamic, read_exported_symbols
from ncclcheck.ncclib.version import NcclVersion, decode, encode, from_torch_tuple, parse_label
from plugins.build import gcc


@pytest.mark.parametrize("code,text", [(2804, "2.8.4"), (2704, "2.7.4"), (20906, "2.9.6"),
                                       (21104, "2.11.4"), (23007, "2.30.7"), (23203, "2.32.3")])
def test_decode_both_encodings(code, text):
    assert str(decode(code)) == text
    major, minor, patch = map(int, text.split("."))
    assert encode(major, minor, patch) == code


def test_decode_rejects_nonsense():
    with pytest.raises(ValueError):
        decode(7)


@pytest.mark.parametrize("label,expected,revision", [
    ("2.11.4-1", NcclVersion(2, 11, 4), "1"), ("2.7.8", NcclVersion(2, 7, 8), None),
    ("2.16.2-1+cuda12.0", NcclVersion(2, 16, 2), "1+cuda12.0"), ("v2.21", NcclVersion(2, 21, 0), None)])
def test_labels(label, expected, revision):
    parsed = parse_label(label)
    assert parsed is not None and parsed.version == expected and parsed.revision == revision


@pytest.mark.parametrize("label", ["latest", "", "two.eleven"])
def test_labels_that_are_not_versions(label):
    assert parse_label(label) is None


def test_torch_tuple_forms():
    assert from_torch_tuple((2, 21, 5)) == NcclVersion(2, 21, 5)
    assert from_torch_tuple((2, 27, 3, "")) == NcclVersion(2, 27, 3)
    assert from_torch_tuple(2708) == NcclVersion(2, 7, 8)
    assert from_torch_tuple(None) is None


def test_dynamic_section_rpath_runpath_needed(tmp_path):
    lib = gcc("fake_nccl.c", tmp_path / "nccl" / "libnccl.so.2", "-Wl,-soname,libnccl.so.2")
    rpath = gcc("requester.c", tmp_path / "librpath.so", f"-L{lib.parent}", "-l:libnccl.so.2",
                "-Wl,--disable-new-dtags,-rpath,$ORIGIN/nccl:/opt/x")
    runpath = gcc("requester.c", tmp_path / "librunpath.so", f"-L{lib.parent}", "-l:libnccl.so.2",
                  "-Wl,--enable-new-dtags,-rpath,/opt/y")
    info = read_dynamic(rpath)
    assert "libnccl.so.2" in info.needed
    assert info.rpath == ["$ORIGIN/nccl", "/opt/x"] and info.runpath is None
    info = read_dynamic(runpath)
    assert info.runpath == ["/opt/y"] and info.rpath is None
    assert read_dynamic(lib).soname == "libnccl.so.2"


def test_exported_symbols_only_defined_ones(tmp_path):
    plugin = gcc("plugin.c", tmp_path / "libnccl-net.so", "-DNET_VERSION=8", "-DTUNER_VERSION=3")
    symbols = read_exported_symbols(plugin)
    assert {"ncclNetPlugin_v8", "ncclTunerPlugin_v3", "plugin_stub_loaded"} <= set(symbols)
    assert "ncclCollNetPlugin_v8" not in symbols
    requester = gcc("requester.c", tmp_path / "libreq.so")  # ncclGetVersion stays undefined
    assert "ncclGetVersion" not in read_exported_symbols(requester)
    assert "requester_nccl_version" in read_exported_symbols(requester)


def test_rodata_of_a_library(tmp_path):
    lib = gcc("fake_nccl.c", tmp_path / "libnccl.so.2", '-DBANNER="2.19.3+cuda12.3"')
    with ElfFile(lib) as elf:
        assert b"NCCL version 2.19.3+cuda12.3" in elf.section_bytes(".rodata")


@pytest.mark.parametrize("content", [b"", b"not an elf at all", b"\x7fELF\x02\x01\x01" + b"\0" * 9])
def test_non_elf_files_raise_elf_error(tmp_path, content):
    path = tmp_path / "libbroken.so"
    path.write_bytes(content)
    with pytest.raises(ElfError):
        read_dynamic(path)


def test_missing_file_is_elf_error(tmp_path):
    with pytest.raises(ElfError):
        ElfFile(tmp_path / "nothing.so")


def test_fifo_is_not_opened(tmp_path):
    import os
    fifo = tmp_path / "libnccl-net.so"
    os.mkfifo(fifo)
    with pytest.raises(ElfError, match="not a regular file"):
        read_dynamic(fifo)
