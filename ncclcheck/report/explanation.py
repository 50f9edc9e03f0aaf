"""Explain's output: a terminal report, markdown for tickets, JSON per the contract.

Each renderer reads the explanation as a dict (``Explanation.to_dict()``), so this module needs
nothing of the explainer; which one draws which format is the format table's (``formats.py``).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from ncclcheck.verdicts import verdict_line

from .width import fit, output_width

WIDTH = 96  # not on a terminal (width.output_width is None)


def render_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str)


def summary_lines(data: dict[str, Any]) -> list[str]:
    """The five lines that say what NCCL printed about itself (``nccl`` of the explanation)."""
    cuda = ", ".join(f"{k} {v}" for k, v in (("driver", data["cuda_driver"]),
                                              ("runtime", data["cuda_runtime"])) if v)
    comms = "not seen"
    if data["nranks"] or data["init_started"] or data["init_complete"]:
        sizes = "/".join(str(n) for n in data["nranks"]) or "?"
        comms = (f"nranks {sizes}; {data['init_started']} rank(s) started init, "
                 f"{data['init_complete']} completed")
    nets = data["networks"]
    return [
        f"NCCL {data['version'] or '(version not printed)'}"
        + (f" (CUDA {cuda})" if cuda else ""),
        "Interfaces: " + (", ".join(data["interfaces"]) or "none printed")
        + (f" (network {', '.join(nets)})" if nets else ""),
        "Transports: " + (", ".join(data["transports"]) or "none printed"),
        "Plugins: " + ("; ".join(data["plugins"][:4]) or "none printed"),
        "Communicators: " + comms,
    ]


def _where(f: dict[str, Any]) -> str:
    parts = []
    if f["rank"] is not None:
        parts.append(f"rank {f['rank']}")
    if f["host"]:
        parts.append(f"on {f['host']}")
    return " ".join(parts)


def _inferred(source: dict[str, Any]) -> str:
    """Where an inferred cause was read from."""
    return (f"inferred from line {source['line']} of {source['file']}: "
            f"{source['text'].strip()[:200]}")


def _others(f: dict[str, Any]) -> str:
    extra = []
    if len(f["ranks"]) > 1:
        extra.append(f"ranks {_span(f['ranks'])}")
    if len(f["hosts"]) > 1:
        extra.append(f"{len(f['hosts'])} hosts")
    return ", ".join(extra)


def _span(ranks: list[int]) -> str:
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    shown = ",".join(str(r) for r in ranks[:12])
    return shown + (",..." if len(ranks) > 12 else "")


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, output_width() or WIDTH, initial_indent=indent,
                         subsequent_indent=" " * len(indent)) or [indent]


def _hypothesis_lines(data: dict[str, Any]) -> list[str]:
    """The ranked candidates, one line each with its evidence's first line (table)."""
    hyps = data.get("hypotheses") or []
    if len(hyps) < (2 if data["findings"] else 1):
        return []
    title = ("Most likely categories (root cause first; a model's reading is marked model):"
             if data["findings"] else
             "A model's guesses (no root cause: below the confidence it names one at):")
    out = ["", title]
    for n, h in enumerate(hyps, 1):
        out.append(f"  {n}. {h['category']:<16} {h['confidence']:>5.0%}  {h['source']}")
        for e in h["evidence"][:2]:
            out += _wrap(f"{e['file']}:{e['line']}: {e['text'].strip()[:160]}", "        ")
    return out


def _also_found(findings: list[dict[str, Any]], title: str) -> list[str]:
    out = ["", title]
    for f in findings:
        mark = "*" if f["consequence"] else "!" if f["warning"] else " "
        where = _others(f) or _where(f)
        out.append(f" {mark} {f['count']:>4}x  {f['id']:<32} {f['category']:<15} "
                   f"{f['file']}:{f['line']}" + (f"  {where}" if where else ""))
        out += _wrap(f["fix"], "          fix: ")
    return out


def render_table(data: dict[str, Any]) -> str:
    findings = data["findings"]
    out = [f"ncclcheck explain — {len(data['files'])} log(s)"]
    if not findings:
        out += ["", "No known failure found."] + _hypothesis_lines(data)
    elif not findings[0]["root_cause"]:  # a launcher's report alone: it says how, not why
        out += ["", "No root cause found."]
        out += _also_found(findings, "Found (* what follows a failure, not its cause):")
        out += _hypothesis_lines(data)
    else:
        root = findings[0]
        out += ["", f"ROOT CAUSE  {root['title']}  [{root['id']}, {root['category']}]"]
        where = _where(root)
        place = f"{root['file']}:{root['line']}" if root["line"] else root["file"]
        out.append(f"  where:  {place}" + (f"  ({where})" if where else ""))
        out += _wrap(root["text"][:300], "  line:   ")
        if root.get("inferred_from"):
            out += _wrap(_inferred(root["inferred_from"]), "  cause:  ")
        out += _wrap(root["explanation"], "  what:   ")
        out += _wrap(root["fix"], "  fix:    ")
        if data.get("verdict"):
            out += _wrap(verdict_line(data["verdict"]), "  verdict: ")
        if root["count"] > 1:
            others = _others(root)
            out.append(f"  seen {root['count']} times" + (f" ({others})" if others else ""))
        rest = findings[1:]
        if rest:
            out += _also_found(rest, "Also found (grouped; * usually a consequence of the root "
                                     "cause):")
        out += _hypothesis_lines(data)
    if data["nccl"]:
        out += ["", "What NCCL said:"] + ["  " + line for line in summary_lines(data["nccl"])]
    for note in data.get("notes") or []:
        out += [""] + _wrap(note["text"], "Note: ")
    return "\n".join(fit(out, output_width()))


def _hypothesis_table(hyps: list[dict[str, Any]], title: str) -> list[str]:
    out = ["", f"## {title}", "", "| # | category | confidence | source | evidence |",
           "|---:|---|---:|---|---|"]
    for n, h in enumerate(hyps, 1):
        first = h["evidence"][0] if h["evidence"] else None
        cell = (f"`{first['file']}:{first['line']}` "
                f"{first['text'].strip()[:120]}".replace("|", "\\|")) if first else ""
        out.append(f"| {n} | {h['category']} | {h['confidence']:.0%} | {h['source']} | {cell} |")
    return out


def _found_table(findings: list[dict[str, Any]], title: str) -> list[str]:
    out = ["", f"## {title}", "", "| count | id | category | where | fix |",
           "|---:|---|---|---|---|"]
    for f in findings:
        cell = f["fix"].replace("|", "\\|")
        where = f"{f['file']}:{f['line']} {_others(f) or _where(f)}".strip()
        out.append(f"| {f['count']} | `{f['id']}` | {f['category']} | {where} | {cell} |")
    return out


def render_markdown(data: dict[str, Any]) -> str:
    findings = data["findings"]
    out = ["# ncclcheck explain", ""]
    hyps = data.get("hypotheses") or []
    if not findings:
        out.append("No known failure found.")
        out += _hypothesis_table(hyps, "A model's guesses") if hyps else []
    elif not findings[0]["root_cause"]:
        out += ["No root cause found."] + _found_table(findings, "Found")
        out += _hypothesis_table(hyps, "A model's guesses") if hyps else []
    else:
        root = findings[0]
        out += [f"## Root cause: {root['title']}", "",
                f"- **id**: `{root['id']}` ({root['category']})",
                f"- **where**: `{root['file']}:{root['line']}` {_where(root)}".rstrip(),
                f"- **line**: `{root['text'][:300]}`",
                *([f"- **cause**: {_inferred(root['inferred_from'])}"]
                  if root.get("inferred_from") else []),
                f"- **what happened**: {root['explanation']}",
                f"- **fix**: {root['fix']}",
                *([f"- **verdict**: {verdict_line(data['verdict'])}"]
                  if data.get("verdict") else [])]
        if len(findings) > 1:
            out += _found_table(findings[1:], "Also found")
        if len(hyps) > 1:
            out += _hypothesis_table(hyps, "Most likely categories")
    if data["nccl"]:
        out += ["", "## What NCCL said", ""] + [f"- {line}" for line in summary_lines(data["nccl"])]
    notes = data.get("notes") or []
    if notes:
        out += ["", "## Notes", ""] + [f"- {note['text']}" for note in notes]
    return "\n".join(out)
