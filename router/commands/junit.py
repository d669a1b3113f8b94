"""`router test --format junit`: the test report as JUnit XML, the format CI systems read.

One `<testsuite>` per file holding cases (a test file, or a policy file with inline examples),
one `<testcase>` per case or example (`classname` the file, `file` and `line` where it is), and a
`<failure>` whose `message` is the first problem and whose text is all of them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from router.testing.runner import CaseResult, TestReport


def render(report: TestReport) -> str:
    """The report as a JUnit XML document (UTF-8, with the XML declaration)."""
    suites: dict[str, list[CaseResult]] = {}
    for result in report.results:
        suites.setdefault(result.span.path, []).append(result)
    root = ET.Element("testsuites", name="router test", tests=str(len(report.results)),
                      failures=str(report.failed), errors="0")
    for path, results in suites.items():
        failed = sum(1 for r in results if not r.passed)
        suite = ET.SubElement(root, "testsuite", name=path, tests=str(len(results)), failures=str(failed),
                              errors="0", skipped="0")
        for result in results:
            case = ET.SubElement(suite, "testcase", name=result.name, classname=path, file=path,
                                 line=str(result.span.line))
            if not result.passed:
                first = result.problems[0].splitlines()[0] if result.problems else "failed"
                failure = ET.SubElement(case, "failure", message=first, type="failure")
                failure.text = "\n".join(result.problems) or "failed"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
