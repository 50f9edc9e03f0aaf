"""JUnit XML for CI gates: one testcase per check; fail and error as failures, skip as skipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ncclcheck.model import Report


def render_junit(report: Report) -> str:
    """One testcase per row as people read them (cluster mode: one per check id)."""
    data = report.shown().to_dict()
    checks = data["checks"]
    failures = sum(c["status"] in ("fail", "error") for c in checks)
    skipped = sum(c["status"] == "skip" for c in checks)
    suite = ET.Element("testsuite", name="ncclcheck", tests=str(len(checks)),
                       failures=str(failures), errors="0", skipped=str(skipped))
    for c in checks:
        name = c["id"] + (f" [{c['host']} rank {c['rank']}]" if c.get("rank") is not None else "")
        case = ET.SubElement(suite, "testcase", classname=f"ncclcheck.{c['id'].split('.')[0]}",
                             name=name)
        if c["status"] in ("fail", "error"):
            node = ET.SubElement(case, "failure", message=c["summary"],
                                 type=c["category"] or c["status"])
            node.text = f"{c['summary']}\nfix: {c['fix']}"
        elif c["status"] == "skip":
            ET.SubElement(case, "skipped", message=c["summary"])
        elif c["status"] == "warn":
            out = ET.SubElement(case, "system-out")
            out.text = f"WARNING: {c['summary']}\nfix: {c['fix']}"
    root = ET.Element("testsuites", name="ncclcheck", tests=str(len(checks)),
                      failures=str(failures))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
