"""Packs from installed Python distributions (a real wheel, pip-installed into a throwaway target
directory) and `router test --format junit` read back as CI tools read it."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from tests.gitrepo import Project, dedent, make_project

PACK = """
version: 1
rules:
  - id: acme-careful
    on: input
    when: "contains(text, 'deploy')"
    do: [{notify: "acme: deploys go through the release checklist"}]
"""

INFO = "acme_router_policies-0.1.dist-info"


def build_wheel(directory: Path) -> Path:
    """acme_router_policies 0.1: a package holding acme.yaml, declared in the packs entry point group."""
    files = {
        "acme_router_policies/__init__.py": "",
        "acme_router_policies/acme.yaml": dedent(PACK),
        f"{INFO}/METADATA": "Metadata-Version: 2.1\nName: acme-router-policies\nVersion: 0.1\n",
        f"{INFO}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{INFO}/entry_points.txt": "[pi_policy_router.packs]\nacme = acme_router_policies\n",
    }
    record = [f"{name},sha256={_digest(text)},{len(text.encode())}" for name, text in files.items()]
    files[f"{INFO}/RECORD"] = "\n".join([*record, f"{INFO}/RECORD,,"]) + "\n"
    wheel = directory / "acme_router_policies-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def installed(tmp_path: Path) -> Project:
    """A project whose router sees the wheel pip installed into a target directory."""
    target = tmp_path / "site"
    wheel = build_wheel(tmp_path)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, timeout=120)
    project = make_project(tmp_path)
    project.env["PYTHONPATH"] = str(target)
    return project


def test_a_pip_installed_pack_is_listed_and_usable_by_name(tmp_path: Path) -> None:
    project = installed(tmp_path)
    project.policy("version: 1\nuse: [acme]\n")

    listing = project.router("packs")
    lint = project.router("lint")
    explained = project.router("explain", "--event", "-", stdin='{"type": "input", "text": "deploy now"}')
    unknown = make_project(tmp_path / "other").router("packs", "--format", "json")

    (row,) = [line for line in listing.stdout.splitlines() if line.startswith("acme")]
    assert "distribution acme-router-policies 0.1 (acme_router_policies)" in row
    assert row.endswith(str(tmp_path / "site" / "acme_router_policies" / "acme.yaml"))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "decision: 1 action from rule acme-careful" in explained.stdout
    assert "acme" not in [p["name"] for p in json.loads(unknown.stdout)["packs"]]


def test_a_misspelled_pack_suggests_the_installed_one(tmp_path: Path) -> None:
    project = installed(tmp_path)
    project.policy("version: 1\nuse: [acm]\n")
    done = project.router("lint")
    assert "expected one of acme, cuttle" in done.stdout and "did you mean 'acme'" in done.stdout


def test_junit_report_has_one_testcase_per_case_and_failures_with_messages(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    policy = project.policy("""
        version: 1
        rules:
          - id: read-only
            on: input
            when: "text == 'review'"
            do: [{tools: {only: [read]}}]
            examples:
              - event: {type: input, text: review}
                expect: {fires: true}
    """)
    (policy.parent / "router.test.yaml").write_text(dedent("""
        cases:
          - name: review cuts the tools
            event: {type: input, text: review}
            expect: {fired: [read-only]}
          - name: a wrong expectation
            event: {type: input, text: hello}
            expect: {fired: [read-only]}
    """))

    done = project.router("test", "--format", "junit")

    assert done.returncode == 1
    root = ET.fromstring(done.stdout)
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "3", "1")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {".pi/router.yaml", ".pi/router.test.yaml"}
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"read-only example 1", "review cuts the tools", "a wrong expectation"}
    assert cases["review cuts the tools"].get("classname") == ".pi/router.test.yaml"
    assert cases["review cuts the tools"].find("failure") is None
    failure = cases["a wrong expectation"].find("failure")
    assert failure is not None and failure.get("message") == "fired differ"
    assert "expected fired" in (failure.text or "")
    assert suites[".pi/router.test.yaml"].get("failures") == "1"
