"""`ncclcheck hang`'s output: the culprit first, then one line per group of ranks (culprits
first, then the largest), then each process and the notes.

The document is explain's (``Explanation.to_dict()``: findings, hypotheses, notes) plus a
``hang`` object with the snapshot's groups and processes; the JSON format prints it whole
(formats.py), these renderers draw the rest for people.
"""

from __future__ import annotations

import textwrap
from typing import Any

from ncclcheck.verdicts import verdict_line

from .width import fit, output_width

WIDTH = 100  # not on a terminal (width.output_width is None)
MAX_PROCESS_ROWS = 64
MAX_STACK_LINES = 12


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, output_width() or WIDTH, initial_indent=indent,
                         subsequent_indent=" " * len(indent)) or [indent]


def _headline(data: dict[str, Any]) -> str:
    hang = data["hang"]
    launchers = sorted({p["launcher"] for p in hang["processes"] if p.get("launcher")})
    return (f"ncclcheck hang — {len(hang['processes'])} process(es) on {hang['host']}"
            + (f" ({', '.join(launchers)})" if launchers else "")
            + f" · {hang['samples']} sample(s) {hang['interval_s']:g} s apart"
            + f" · {hang['duration_s']:.1f} s")


def _verdict_lines(data: dict[str, Any]) -> list[str]:
    findings = [f for f in data["findings"] if f["id"].startswith(("hang.", "fr."))]
    root = data["findings"][0] if data["findings"] and data["findings"][0]["root_cause"] else None
    if root is None:
        return ["", "No rank holds the others up." if data["hang"]["processes"] else
                "No training process to look at."]
    label = "CULPRIT" if root["category"] == "desync" else "HANG"
    out = [""] + _wrap(f"{root['text']}  [{root['id']}, {root['category']}]", f"{label:<9}")
    out += _wrap(root["explanation"], "  what:  ")
    out += _wrap(root["fix"], "  fix:   ")
    if data.get("verdict"):
        out += _wrap(verdict_line(data["verdict"]), "  verdict: ")
    for other in findings:
        if other is not root:
            out += _wrap(f"{other['text']}  [{other['id']}]", "  also:  ")
    return out


def _group_rows(groups: list[dict[str, Any]]) -> list[str]:
    if not groups:
        return []
    width = max(5, *(len(g["ranks"] or "?") for g in groups))
    out = ["", f"{'ranks':<{width}}  {'count':>5}  {'state':<8}  where"]
    for g in groups:
        mark = "   <- culprit" if g["culprit"] else ""
        out.append(f"{g['ranks'] or '?':<{width}}  {g['count']:>5}  {g['state']:<8}  "
                   f"{g['where']}{mark}")
    return out


def _cpu(p: dict[str, Any]) -> str:
    if p["exited"]:
        return "exited"
    cpu = p.get("cpu_s")
    wake = p.get("wakeups_per_s")
    if not cpu and not wake:
        return "no"
    parts = [f"cpu +{cpu:.2f}s" if cpu else "", f"{wake:g} wake/s" if wake else ""]
    return ", ".join(x for x in parts if x)


def _process_rows(processes: list[dict[str, Any]]) -> list[str]:
    if not processes:
        return []
    out = ["", "rank  host:pid              state  moving                  wchan               "
               "source        where"]
    for p in processes[:MAX_PROCESS_ROWS]:
        rank = "?" if p["rank"] is None else str(p["rank"])
        where = p["where"] or "; ".join(x["what"] for x in p["problems"][-1:]) or "-"
        out.append(f"{rank:<4}  {(p['host'] + ':' + str(p['pid']))[:20]:<20}  "
                   f"{p['state'] or '-':<5}  {_cpu(p)[:22]:<22}  {(p['wchan'] or '-')[:18]:<18}  "
                   f"{p['source'] or '-':<12}  {where}")
    if len(processes) > MAX_PROCESS_ROWS:
        out.append(f"... {len(processes) - MAX_PROCESS_ROWS} more (--format json lists all)")
    return out


def _culprit_stack(data: dict[str, Any]) -> list[str]:
    """The first culprit's stack, innermost first, as the snapshot took it."""
    root = data["findings"][0] if data["findings"] and data["findings"][0]["root_cause"] else None
    if root is None or not root["id"].startswith("hang.") or root["rank"] is None:
        return []
    proc = next((p for p in data["hang"]["processes"] if p["rank"] == root["rank"]
                 and p["host"] == root["host"]), None)
    if proc is None or not proc["stack"]:
        return []
    shown = proc["stack"][:MAX_STACK_LINES]
    more = len(proc["stack"]) - len(shown)
    return (["", f"rank {proc['rank']}'s stack ({proc['thread'] or 'thread'}, innermost first):"]
            + [f"  {frame}" for frame in shown] + ([f"  ... {more} more"] if more > 0 else []))


def render_table(data: dict[str, Any]) -> str:
    hang = data["hang"]
    out = [_headline(data)] + _verdict_lines(data)
    out += _culprit_stack(data)
    out += _group_rows(hang["groups"])
    out += _process_rows(hang["processes"])
    for gone in hang["gone"]:
        out += _wrap(gone["why"], f"gone:  rank {gone['rank'] if gone['rank'] is not None else '?'}"
                                  ": ")
    for note in data.get("notes") or []:
        out += [""] + _wrap(note["text"], "Note: ")
    for note in hang["notes"]:
        out += [""] + _wrap(note, "Note: ")
    if hang.get("out"):
        out += ["", f"Snapshot written to {hang['out']} (join every node's: ncclcheck explain "
                    f"{hang['out']})"]
    return "\n".join(fit(out, output_width()))


def render_markdown(data: dict[str, Any]) -> str:
    hang = data["hang"]
    out = [f"# {_headline(data)}", ""]
    root = data["findings"][0] if data["findings"] and data["findings"][0]["root_cause"] else None
    if root is None:
        out.append("No rank holds the others up.")
    else:
        out += [f"## {root['title']}", "", f"- **id**: `{root['id']}` ({root['category']})",
                f"- **seen**: {root['text']}", f"- **what**: {root['explanation']}",
                f"- **fix**: {root['fix']}",
                *([f"- **verdict**: {verdict_line(data['verdict'])}"]
                  if data.get("verdict") else [])]
    out += ["", "## Where the ranks are", "", "| ranks | count | state | where |",
            "|---|---:|---|---|"]
    for g in hang["groups"]:
        mark = " **(culprit)**" if g["culprit"] else ""
        out.append(f"| {g['ranks'] or '?'} | {g['count']} | {g['state']} | "
                   f"`{g['where']}`{mark} |")
    out += ["", "## Processes", "", "| rank | host | pid | state | source | where |",
            "|---:|---|---:|---|---|---|"]
    for p in hang["processes"][:MAX_PROCESS_ROWS]:
        out.append(f"| {p['rank'] if p['rank'] is not None else '?'} | {p['host']} | {p['pid']} "
                   f"| {p['state'] or '-'} | {p['source'] or '-'} | `{p['where'] or '-'}` |")
    notes = [n["text"] for n in data.get("notes") or []] + list(hang["notes"])
    if notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(out)
