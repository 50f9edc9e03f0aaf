"""NCCL's log format strings: every WARN/INFO/TRACE format of several releases, the file that
prints it, the releases it appears in, a category by the subsystem that prints it, and a
regular expression a log line's message can be matched with.

NCCL prefixes each WARN with the file and line that printed it (``misc/socket.cc:484 NCCL
WARN``) and each INFO_LOC with the same, so the source file is what a line is classified by;
the wording changes between releases, the subsystems much less. The category of a format is
decided by FILE_RULES below, read top to bottom: a rule names a source-path pattern and,
optionally, words the format must hold (a subsystem that prints both interface and connection
messages, the rank checks among init.cc's messages). The file map in the table gives every
file's category without the word conditions, for lines of releases not read here.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from knowledge_common import table
from ncclcheck.catalogue.knowledge import CONVERSION
from nccl_source import calls, git, source_files

ANY = r"."
# (source path pattern under src/, words the format must hold or None, category); first wins.
FILE_RULES: tuple[tuple[str, str | None, str], ...] = (
    (ANY, r"Duplicate GPU detected|same GPU", "duplicate_gpu"),
    (ANY, r"(?i)mismatched NCCL version|version mismatch", "version_mismatch"),
    (ANY, r"(?i)address already in use", "port_in_use"),
    (r"^transport/net_ib|^misc/(ibvwrap|ibvsymbols|mlx5dv|gdrwrap)|^include/(ibv|mlx5|gdrwrap)",
     None, "infiniband"),
    (r"^plugin/|^net\.cc$|^transport/coll_net|^misc/(tuner|profiler)\.cc$", None, "net_plugin"),
    (r"^transport/shm|^misc/shmutils|^include/shm", None, "shared_memory"),
    (r"^transport/(p2p|nvls)|^mnnvl|ipcsocket", None, "p2p"),
    (r"^misc/socket|^include/socket|^bootstrap|^transport/net_socket|^os/\w*socket",
     r"(?i)interface|ifname|SOCKET_FAMILY|address family|no usable", "interface"),
    (r"^misc/socket|^include/socket|^bootstrap|^transport/net_socket|^os/\w*socket", None,
     "connection"),
    (r"^os/", r"(?i)socket|connect", "connection"),
    (r"^misc/(cudawrap|nvmlwrap|strongstream)|^include/(cudawrap|nvmlwrap|strongstream)", None,
     "cuda"),
    (r"^include/alloc|^allocator|^mem_manager", r"(?i)fail|out of memory|cannot allocate",
     "out_of_memory"),
    (r"^include/alloc|^allocator|^mem_manager", None, "cuda"),
    (r"^include/checks", r"(?i)cuda", "cuda"),
    (r"^init\.cc$", r"(?i)invalid rank|rank %d exceeds|nranks|ranks? requested|invalid device",
     "rank_mismatch"),
    (r"^init\.cc$", r"(?i)invalid config|NCCL_[A-Z_]+=", "configuration"),
    (r"^(enqueue|proxy|group|init)\.cc$", r"(?i)timed? ?out", "timeout"),
    (r"^misc/(argcheck|param)|^param/|^include/param|^graph/tuning", None, "configuration"),
    (r"^graph/paths", r"P2P|p2p|NVL|NVLink", "p2p"),
    (ANY, None, "other"),
)
RULE = ("by the file that prints the format (paths under src/), first rule wins: "
        + "; ".join(f"{path}{' with /' + words + '/' if words else ''} -> {cat}"
                    for path, words, cat in FILE_RULES)
        + ". A format inside a macro of include/checks.h is printed with the file that uses "
        "the macro, so its words decide (`macro`: true).")
COLUMNS = ["format", "level", "file", "releases", "category", "subsys", "macro"]
# A message's leading tag ("NET/IB : ...") says its subsystem when its format is not known (a
# release not read here): tags whose formats agree on a category (>= 75 % of at least 3).
TAG = re.compile(r"([A-Z]\w*(?:/\w+)*)\s?:\s")
TAG_STOP = frozenset({"Error", "Warning", "HINT", "Net", "NET", "ENV"})
SHAPE = re.compile(r'"([^"]*(?:NCCL (?:WARN|INFO|TRACE|CALL)|%s:%d:%d )[^"]*)"')


def literal_chars(fmt: str) -> int:
    return len(CONVERSION.sub("", fmt).strip())


def message_tags(entries: list[dict[str, Any]]) -> dict[str, str]:
    seen: dict[str, Counter[str]] = {}
    for entry in entries:
        if (m := TAG.match(entry["format"])) and m[1] not in TAG_STOP:
            seen.setdefault(m[1], Counter())[entry["category"]] += 1
    found = {}
    for tag, counts in sorted(seen.items()):
        cat, n = counts.most_common(1)[0]
        if cat != "other" and sum(counts.values()) >= 3 and n >= 0.75 * sum(counts.values()):
            found[tag] = cat
    return found


def category(path: str, fmt: str) -> str:
    for pattern, words, cat in FILE_RULES:
        if re.search(pattern, path) and (words is None or re.search(words, fmt)):
            return cat
    return "other"


def file_category(path: str) -> str:
    for pattern, words, cat in FILE_RULES:
        if words is None and re.search(pattern, path):
            return cat
    return "other"


def release_of(tag: str) -> str:
    return tag.lstrip("v").split("-")[0]


def nccl_formats_table(git_dir: Path, tags: list[str], levels: tuple[str, ...]) -> dict[str, Any]:
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    files: dict[str, str] = {}
    shapes: dict[str, list[str]] = {}
    for tag in tags:
        release = release_of(tag)
        shapes[release] = SHAPE.findall(git(git_dir, "show", f"{tag}:src/debug.cc"))
        for name in source_files(git_dir, tag):
            path = name.removeprefix("src/")
            text = git(git_dir, "show", f"{tag}:{name}")
            for call in calls(text):
                if call.level not in levels or literal_chars(call.format) == 0:
                    continue
                files.setdefault(path, file_category(path))
                key = (call.level, call.format, path)
                entry = found.setdefault(key, {
                    "format": call.format, "level": call.level, "file": path, "releases": [],
                    "category": "cuda" if call.in_macro and "uda" in call.format
                    else category(path, call.format),
                    "subsys": call.flags, "macro": int(call.in_macro)})
                if release not in entry["releases"]:
                    entry["releases"].append(release)
    entries = sorted(found.values(), key=lambda e: (e["file"], e["level"], e["format"]))
    releases = [release_of(t) for t in tags]
    rows = [[e[c] for c in COLUMNS] for e in entries]
    return table("nccl_formats", "nccl",
                 "NVIDIA/nccl repository: every src/ file's WARN/INFO/TRACE calls; src/debug.cc "
                 "for the line shapes", ", ".join(releases), RULE, rows,
                 columns=COLUMNS, levels=list(levels), line_shapes=shapes,
                 line_shape=("[timestamp ]host:pid:tid [cudaDev] file:line [(function) ]NCCL "
                             "WARN message; host:pid:tid [cudaDev] NCCL INFO message (an INFO_LOC "
                             "message starts with file:line (function)); host:pid:tid [cudaDev] "
                             "ms function:line NCCL TRACE message; host:pid:tid NCCL CALL "
                             "message. A WARN is preceded by an empty line. The timestamp "
                             "(NCCL_DEBUG_TIMESTAMP_FORMAT, on WARN by default) since 2.26; "
                             "(function) on WARN since 2.30."),
                 files=dict(sorted(files.items())),
                 file_rules=[[path, cat] for path, words, cat in FILE_RULES
                             if words is None and path != ANY],
                 tags=message_tags(entries),
                 tag_rule="a message's leading tag (word or path before ' :' or ':') whose "
                 "formats agree on one category other than other: at least 3 formats, 75 % of "
                 f"them; words that are no subsystem are left out: {', '.join(sorted(TAG_STOP))}")
