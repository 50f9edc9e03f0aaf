"""The report model and its renderers: JSON against the documented schema, JUnit parsed back."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from ncclcheck.model import (Category, CheckResult, Report, Status, exit_code, failed,
                             overall_status, passed, skipped, warned)
from ncclcheck.report.json import render_json
from ncclcheck.report.junit import render_junit
from ncclcheck.report.markdown import render_markdown
from ncclcheck.report.table import render_table

SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report.schema.json").read_text())


def sample() -> Report:
    return Report([
        passed("ranks.launcher", "launcher: torchrun", launcher="torchrun"),
        failed("ranks.world_size", "world size 4 != 2 x 4 = 8", "Set WORLD_SIZE=8.",
               Category.RANK_MISMATCH, world_size=4),
        warned("ranks.master", "MASTER_ADDR not set", "Export MASTER_ADDR.", Category.CONFIGURATION),
        skipped("ranks.layout", "layout unknown"),
        CheckResult("net.probe", Status.ERROR, "probe raised", {}, "Report it.", Category.OTHER,
                    host="node1", rank=3),
    ], {"host": "node0", "launcher": "torchrun", "python": "3.11", "torch": "2.13"})


def test_json_validates_against_the_documented_schema():
    data = json.loads(render_json(sample()))
    jsonschema.validate(data, SCHEMA)
    assert data["status"] == "fail" and data["tool"] == "ncclcheck"
    assert data["checks"][1]["category"] == "rank_mismatch"


def test_schema_rejects_a_failing_check_without_fix():
    data = json.loads(render_json(sample()))
    data["checks"][1]["fix"] = None
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


def test_schema_rejects_unknown_category():
    data = json.loads(render_json(sample()))
    data["checks"][1]["category"] = "gremlins"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


def test_junit_one_testcase_per_check():
    root = ET.fromstring(render_junit(sample()))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 5
    assert suite.get("failures") == "2" and suite.get("skipped") == "1"
    failures = [c for c in cases if c.find("failure") is not None]
    assert {c.get("name").split(" ")[0] for c in failures} == {"ranks.world_size", "net.probe"}
    assert "Set WORLD_SIZE=8." in failures[0].find("failure").text
    assert cases[3].find("skipped") is not None


def test_table_and_markdown_carry_summaries_and_fixes():
    table = render_table(sample())
    assert "world size 4 != 2 x 4 = 8" in table and "Set WORLD_SIZE=8." in table
    assert "Result: FAIL" in table
    markdown = render_markdown(sample())
    assert markdown.startswith("## ncclcheck: FAIL")
    assert "| FAIL | `ranks.world_size` |" in markdown


def test_passing_checks_never_carry_a_fix():
    check = CheckResult("ranks.rank", Status.PASS, "ok", {}, "stale fix", Category.RANK_MISMATCH)
    assert check.fix is None and check.category is None


def test_non_passing_check_defaults_to_category_other():
    assert CheckResult("ranks.x", Status.FAIL, "bad", {}, "do y").category is Category.OTHER


def test_round_trip_through_dict():
    original = sample().checks[4]
    assert CheckResult.from_dict(original.to_dict()) == original


@pytest.mark.parametrize("statuses, status, code, strict_code", [
    ([Status.PASS, Status.SKIP], "pass", 0, 0),
    ([Status.PASS, Status.WARN], "warn", 0, 1),
    ([Status.WARN, Status.FAIL], "fail", 1, 1),
    ([Status.ERROR], "fail", 1, 1),
])
def test_status_and_exit_codes(statuses, status, code, strict_code):
    results = [CheckResult(f"ranks.c{i}", s, "x", {}, "fix", Category.OTHER)
               for i, s in enumerate(statuses)]
    assert overall_status(results) == status
    assert exit_code(results) == code and exit_code(results, strict=True) == strict_code


def test_report_is_redacted(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_verysecretvalue")
    report = Report([failed("ranks.env", "saw HF_TOKEN=hf_verysecretvalue in the environment",
                            "unset it", Category.CONFIGURATION,
                            variables={"HF_TOKEN": "hf_verysecretvalue", "RANK": "0"},
                            note="value hf_verysecretvalue leaked")],
                    {"host": "h", "launcher": "x", "python": "3"})
    for text in (render_json(report), render_table(report), render_markdown(report),
                 render_junit(report)):
        assert "hf_verysecretvalue" not in text
        assert "***" in text
