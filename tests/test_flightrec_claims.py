"""A dump's numbers are not believed beyond its size: a memo slot or a length that a corrupted
byte made huge is refused before the C unpickler allocates for it, in bounded memory and time.

The dumps are torch's own (its recorder over Gloo, a subprocess), changed where one corrupted
opcode would change them; explain runs in a process limited to 1 GiB of address space and
30 s of CPU, so that a regression fails the test instead of taking the machine's memory.
"""

from __future__ import annotations

import pickle
import pickletools
import struct
from pathlib import Path

import pytest

from frdumps import claim_length, claim_memo_slot, entry, explain_limited, mutated
from ncclcheck.flightrec.claims import Overclaim, check_claims
from ncclcheck.flightrec.load import DumpError, read_dump

CPU_SECONDS = 30
MEMO_OPS = {"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}


@pytest.fixture
def real_dump(cycling_real_dump) -> bytes:
    """300 collectives in a 200-entry buffer: more than the newest entries explain cuts. (conftest's, made once a session)"""
    return cycling_real_dump


def _explain(folder: Path) -> dict:
    return explain_limited(folder, CPU_SECONDS, timeout=60)[0]


def _unreadable(result: dict) -> list[str]:
    return [n["text"] for n in result["notes"] if n["id"] == "fr.unreadable"]


def _folder(tmp_path: Path, data: bytes) -> Path:
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "nccl_trace_rank_0").write_bytes(data)
    return folder


@pytest.mark.parametrize("slot", [40_000_000, 2**32 - 16])
@pytest.mark.parametrize("newest", [False, True], ids=["first put", "among the newest"])
def test_a_real_dump_claiming_a_huge_memo_slot_is_refused_in_bounded_memory(
        tmp_path, real_dump, slot, newest):
    # 40 million slots fit the limit (the unpickler would clear 640 MB and read the dump);
    # 4 billion do not (it would fail for memory): both are one corrupted opcode
    notes = _unreadable(_explain(_folder(tmp_path, claim_memo_slot(real_dump, slot,
                                                                          newest))))
    assert len(notes) == 1, notes
    assert "is a truncated or corrupt pickle (LONG_BINPUT at byte" in notes[0]
    assert f"names memo slot {slot:,}, more than a pickle of" in notes[0]


def test_a_real_dump_claiming_a_huge_string_is_refused_in_bounded_memory(tmp_path, real_dump):
    notes = _unreadable(_explain(_folder(tmp_path, claim_length(real_dump, 2**32 - 16))))
    assert len(notes) == 1, notes
    assert "is a truncated or corrupt pickle (BINUNICODE at byte" in notes[0]
    assert "claims 4,294,967,280 bytes where" in notes[0]


def test_the_unmutated_real_dump_reads_as_before_within_the_limits(tmp_path, real_dump):
    folder = _folder(tmp_path, real_dump)
    result = _explain(folder)
    assert not _unreadable(result)
    assert [n["id"] for n in result["notes"]][:1] == ["fr.all_completed"]
    check_claims(real_dump)
    plain = pickle.loads(real_dump)["entries"]
    whole = read_dump(str(folder / "nccl_trace_rank_0"))
    assert [(e.record_id, e.seq, e.op, len(e.frames)) for e in whole.entries] == [
        (e["record_id"], e["collective_seq_id"], e["profiling_name"].split(":")[1],
         len(e["frames"])) for e in plain]
    cut = read_dump(str(folder / "nccl_trace_rank_0"), newest=64)
    assert not cut.complete and cut.entries == whole.entries[-64:]


def _proto(number: int) -> bytes:
    return b"\x80" + bytes([number])


@pytest.mark.parametrize("name, code, width", [
    ("BINUNICODE", b"X", 4), ("SHORT_BINUNICODE", b"\x8c", 1), ("BINUNICODE8", b"\x8d", 8),
    ("BINBYTES", b"B", 4), ("SHORT_BINBYTES", b"C", 1), ("BINBYTES8", b"\x8e", 8),
    ("BYTEARRAY8", b"\x96", 8), ("BINSTRING", b"T", 4), ("LONG1", b"\x8a", 1),
    ("LONG4", b"\x8b", 4)])
def test_a_length_beyond_the_bytes_left_is_refused_by_name(name, code, width):
    def claiming(length: int) -> bytes:
        return _proto(5) + code + length.to_bytes(width, "little") + b"ab."
    pickle.loads(claiming(2))                    # the form is right: it reads
    check_claims(claiming(2))
    check_claims(claiming(3))                    # "ab." is there: the unpickler says the rest
    with pytest.raises(Overclaim, match=f"^{name} at byte 2 claims 4 bytes where 3 remain$"):
        check_claims(claiming(4))


def test_a_frame_beyond_the_bytes_left_is_refused():
    framed = _proto(4) + b"\x95" + struct.pack("<Q", 2) + b"N."
    assert pickle.loads(framed) is None
    check_claims(framed)
    with pytest.raises(Overclaim, match="^FRAME at byte 2 claims 1,099,511,627,776 bytes"):
        check_claims(_proto(4) + b"\x95" + struct.pack("<Q", 1 << 40) + b"N.")


@pytest.mark.parametrize("code, name", [(b"r", "LONG_BINPUT"), (b"j", "LONG_BINGET")])
def test_a_memo_slot_at_or_past_the_file_size_is_refused(code, name):
    def naming(slot: int) -> bytes:                 # 9 bytes long
        return _proto(2) + b"N" + code + struct.pack("<I", slot) + b"."
    check_claims(naming(8))
    with pytest.raises(Overclaim, match=f"^{name} at byte 3 names memo slot 9, more than a "
                                        "pickle of 9 bytes can hold$"):
        check_claims(naming(9))
    check_claims(naming(9), slots=10)               # a piece of a larger file
    with pytest.raises(Overclaim, match="names memo slot 4,294,967,295"):
        check_claims(naming(2**32 - 1), slots=1 << 30)


def test_text_memo_slots_are_checked_too():
    assert pickle.loads(_proto(2) + b"Np0\ng0\n.") is None
    check_claims(_proto(2) + b"Np0\ng0\n.")
    with pytest.raises(Overclaim, match="^PUT at byte 3 names memo slot 4,000,000,000"):
        check_claims(_proto(2) + b"Np4000000000\n.")
    with pytest.raises(Overclaim, match="^GET at byte 3 names no memo slot$"):
        check_claims(_proto(2) + b"Ngzero\n.")


def test_every_protocol_passes_and_the_walk_ends_where_the_unpickler_does():
    value = {"version": "2.10", "entries": [entry(s) for s in range(1, 40)],
             "blob": b"x" * 70_000, "text": "y" * 300, "big": 10**40, "raw": bytearray(b"z"),
             "shared": [("a", 1.5)] * 3}
    for protocol in range(0, 6):
        data = pickle.dumps(value, protocol=protocol)
        check_claims(data)
        check_claims(data + b"X\xff\xff\xff\xff")  # after STOP: never read
    # where the unpickler itself stops (unknown opcode, data cut short), the walk stops too
    check_claims(_proto(2) + b"\xff" + b"X\xff\xff\xff\xff")
    check_claims(_proto(2) + b"J\x01\x00")
    check_claims(_proto(2) + b"X\x05\x00")


def _claims_too_much(data: bytes) -> bool:
    """pickletools' reading of the opcodes the unpickler would reach: a memo slot at or past the
    size, or a length beyond the bytes left, before STOP or an opcode it could not decode."""
    try:
        for op, arg, pos in pickletools.genops(data):
            if op.name in MEMO_OPS and arg >= len(data):
                return True
            if op.name == "STOP":
                return False
    except ValueError as exc:
        return "but only" in str(exc) or "not enough data in stream to read long" in str(exc)
    return False


def test_every_mutated_dump_the_opcodes_say_overclaims_is_refused(real_dump):
    """The walk against pickletools' own: no corrupted copy that claims too much gets past
    (the walk may refuse more: it reads on past a string that is not UTF-8)."""
    small = pickle.dumps({"version": "2.10", "entries": [entry(s) for s in range(1, 8)]},
                         protocol=2)
    seen = {True: 0, False: 0}
    for base in (small, real_dump[:6000]):
        for data in mutated(base, 600, seed=3):
            expected = _claims_too_much(data)
            seen[expected] += 1
            if expected:
                with pytest.raises(Overclaim):
                    check_claims(data)
    assert seen[True] > 30 and seen[False] > 300, seen


def test_a_refused_dump_is_the_usual_one_line_dump_error(tmp_path, real_dump):
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(claim_length(real_dump, 2**31))
    with pytest.raises(DumpError, match=r"^is a truncated or corrupt pickle \(BINUNICODE at "
                                        r"byte \d+ claims 2,147,483,648 bytes where [\d,]+ "
                                        r"remain\)$"):
        read_dump(str(path), newest=64)
