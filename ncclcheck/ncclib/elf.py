"""Just enough ELF to answer the loader's questions, with no outside tools.

The dynamic section tells which libraries an object needs and where ld.so looks for them
(DT_NEEDED, DT_RPATH, DT_RUNPATH); the dynamic symbol table tells which plugin API versions a
plugin exports; .rodata of libnccl lists the plugin symbol names that NCCL build asks for.
Only the byte ranges needed are read, so a 500 MB libnccl costs a few kilobytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

DT_NULL, DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 14, 15, 29
SHT_DYNSYM = 11
SHN_UNDEF = 0
PT_LOAD, PT_DYNAMIC = 1, 2
STB_GLOBAL, STB_WEAK = 1, 2


class ElfError(ValueError):
    """The file is not a readable ELF shared object."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass
class DynamicInfo:
    """What ld.so reads from an object's dynamic section."""

    needed: list[str] = field(default_factory=list)
    soname: str | None = None
    rpath: list[str] | None = None    # DT_RPATH, None when absent
    runpath: list[str] | None = None  # DT_RUNPATH, None when absent


class ElfFile:
    """A read-only view of one ELF file. Use as a context manager or call ``close()``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_file():  # a FIFO or device: never read
            raise ElfError(f"{self.path}: not a regular file")
        try:
            self._fh: BinaryIO = open(self.path, "rb")
        except OSError as exc:
            raise ElfError(f"{self.path}: {exc.strerror or exc}") from exc
        try:
            self._read_header()
        except (struct.error, ElfError) as exc:
            self._fh.close()
            raise ElfError(f"{self.path}: not an ELF shared object ({exc})") from exc

    def __enter__(self) -> "ElfFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._fh.close()

    # -- low level ---------------------------------------------------------------------------
    def _read(self, offset: int, size: int) -> bytes:
        self._fh.seek(offset)
        data = self._fh.read(size)
        if len(data) != size:
            raise ElfError(f"truncated at offset {offset:#x}")
        return data

    def _unpack(self, fmt: str, offset: int) -> tuple:
        fmt = self._endian + fmt
        return struct.unpack(fmt, self._read(offset, struct.calcsize(fmt)))

    def _read_header(self) -> None:
        ident = self._read(0, 16)
        if ident[:4] != b"\x7fELF":
            raise ElfError("bad magic")
        if ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise ElfError("unknown class or byte order")
        self.is64 = ident[4] == 2
        self._endian = "<" if ident[5] == 1 else ">"
        if self.is64:
            (self.type, self.machine, _, _, self.phoff, self.shoff, _, _, self.phentsize,
             self.phnum, self.shentsize, self.shnum, self.shstrndx) = self._unpack(
                "HHIQQQIHHHHHH", 16)
        else:
            (self.type, self.machine, _, _, self.phoff, self.shoff, _, _, self.phentsize,
             self.phnum, self.shentsize, self.shnum, self.shstrndx) = self._unpack(
                "HHIIIIIHHHHHH", 16)
        self._sections: list[Section] | None = None

    def _segments(self) -> list[tuple[int, int, int, int]]:
        """(type, offset, vaddr, filesz) of every program header."""
        out = []
        for i in range(self.phnum):
            base = self.phoff + i * self.phentsize
            if self.is64:
                ptype, _, offset, vaddr, _, filesz, _, _ = self._unpack("IIQQQQQQ", base)
            else:
                ptype, offset, vaddr, _, filesz, _, _, _ = self._unpack("IIIIIIII", base)
            out.append((ptype, offset, vaddr, filesz))
        return out

    def _vaddr_to_offset(self, vaddr: int) -> int:
        for ptype, offset, start, filesz in self._segments():
            if ptype == PT_LOAD and start <= vaddr < start + filesz:
                return offset + (vaddr - start)
        raise ElfError(f"address {vaddr:#x} is in no loadable segment")

    @staticmethod
    def _cstring(blob: bytes, index: int) -> str:
        end = blob.find(b"\0", index)
        return blob[index:end if end >= 0 else len(blob)].decode("utf-8", "replace")

    # -- sections ------------------------------------------------------------------------------
    def sections(self) -> list[Section]:
        if self._sections is not None:
            return self._sections
        raw = []
        for i in range(self.shnum):
            base = self.shoff + i * self.shentsize
            if self.is64:
                name, stype, _, _, offset, size, link, _, _, entsize = self._unpack(
                    "IIQQQQIIQQ", base)
            else:
                name, stype, _, _, offset, size, link, _, _, entsize = self._unpack(
                    "IIIIIIIIII", base)
            raw.append((name, stype, offset, size, link, entsize))
        names = b""
        if raw and self.shstrndx < len(raw):
            _, _, off, size, _, _ = raw[self.shstrndx]
            names = self._read(off, size)
        self._sections = [Section(self._cstring(names, n), t, o, s, l, e)
                          for n, t, o, s, l, e in raw]
        return self._sections

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections() if s.name == name), None)

    def section_bytes(self, name: str) -> bytes:
        sec = self.section(name)
        return b"" if sec is None or sec.type == 8 else self._read(sec.offset, sec.size)

    # -- dynamic section -------------------------------------------------------------------
    def dynamic(self) -> DynamicInfo:
        dyn = next(((o, s) for t, o, _, s in self._segments() if t == PT_DYNAMIC), None)
        if dyn is None:
            raise ElfError(f"{self.path}: no dynamic section (a static object?)")
        offset, size = dyn
        fmt, step = ("qQ", 16) if self.is64 else ("iI", 8)
        entries = []
        for pos in range(offset, offset + size, step):
            tag, value = self._unpack(fmt, pos)
            if tag == DT_NULL:
                break
            entries.append((tag, value))
        strtab = next((v for t, v in entries if t == DT_STRTAB), None)
        if strtab is None:
            raise ElfError(f"{self.path}: dynamic section without a string table")
        str_off = self._vaddr_to_offset(strtab)

        def text(index: int) -> str:
            self._fh.seek(str_off + index)
            chunk = b""
            while b"\0" not in chunk and len(chunk) < 65536:
                more = self._fh.read(256)
                if not more:
                    break
                chunk += more
            return self._cstring(chunk, 0)

        info = DynamicInfo()
        for tag, value in entries:
            if tag == DT_NEEDED:
                info.needed.append(text(value))
            elif tag == DT_SONAME:
                info.soname = text(value)
            elif tag == DT_RPATH:
                info.rpath = [p for p in text(value).split(":") if p]
            elif tag == DT_RUNPATH:
                info.runpath = [p for p in text(value).split(":") if p]
        return info

    # -- symbols ---------------------------------------------------------------------------
    def exported_symbols(self) -> list[str]:
        """Names the object defines and exports (global or weak, not undefined)."""
        dynsym = next((s for s in self.sections() if s.type == SHT_DYNSYM), None)
        if dynsym is None:
            raise ElfError(f"{self.path}: no dynamic symbol table")
        sections = self.sections()
        strtab = sections[dynsym.link] if dynsym.link < len(sections) else None
        if strtab is None:
            raise ElfError(f"{self.path}: dynamic symbol table without strings")
        names = self._read(strtab.offset, strtab.size)
        data = self._read(dynsym.offset, dynsym.size)
        entsize = dynsym.entsize or (24 if self.is64 else 16)
        out = []
        for pos in range(entsize, len(data) - entsize + 1, entsize):  # entry 0 is reserved
            if self.is64:
                name, info, _, shndx, _, _ = struct.unpack_from(self._endian + "IBBHQQ", data, pos)
            else:
                name, _, _, info, _, shndx = struct.unpack_from(self._endian + "IIIBBH", data, pos)
            if shndx != SHN_UNDEF and (info >> 4) in (STB_GLOBAL, STB_WEAK):
                out.append(self._cstring(names, name))
        return out


def read_dynamic(path: str | Path) -> DynamicInfo:
    with ElfFile(path) as elf:
        return elf.dynamic()


def read_exported_symbols(path: str | Path) -> list[str]:
    with ElfFile(path) as elf:
        return elf.exported_symbols()
