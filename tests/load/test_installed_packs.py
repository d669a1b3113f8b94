"""A pack shipped as a Python package (a real wheel, installed by pip into a target directory, run
through the `router` console script): it `use:`s its own files, only those, and names its distribution and
version wherever a policy's origin is shown."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import Project, dedent, make_project

NAME, VERSION = "acme-router-policies", "2.3.1"
INFO = f"acme_router_policies-{VERSION}.dist-info"
WHEEL = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
ENTRY_POINTS = "[pi_policy_router.packs]\nacme = acme_router_policies\n"

ACME = """
version: 1
use: [./base.yaml, ./parts/tools.yaml]
"""

BASE = """
version: 1
rules:
  - id: acme-careful
    on: input
    when: "contains(text, 'deploy')"
    do: [{notify: "acme: deploys go through the release checklist"}]
"""

TOOLS = """
version: 1
rules:
  - id: acme-no-force
    on: tool_call
    match: "tool.name == 'bash' && contains(tool.input.command, '--force')"
    do: [{block: "acme: no force pushes"}]
"""

DEPLOY = '{"type": "input", "text": "deploy now"}'


def build_and_install(tmp: Path, files: dict[str, str]) -> Path:
    """A wheel of acme-router-policies holding `files` (as a build backend writes one: metadata,
    entry points, RECORD), installed by pip into a target directory; returns that directory."""
    files = {"acme_router_policies/__init__.py": "", "acme_router_policies/parts/__init__.py": "",
             **{name: dedent(text) for name, text in files.items()},
             f"{INFO}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n",
             f"{INFO}/WHEEL": WHEEL,
             f"{INFO}/entry_points.txt": ENTRY_POINTS}
    record = [f"{name},sha256={_digest(text)},{len(text.encode())}" for name, text in files.items()]
    files[f"{INFO}/RECORD"] = "\n".join([*record, f"{INFO}/RECORD,,"]) + "\n"
    wheel = tmp / f"acme_router_policies-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    target = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-index", "--target", str(target), str(wheel)], check=True, capture_output=True,
                   timeout=300)
    return target


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    return build_and_install(tmp, {"acme_router_policies/acme.yaml": ACME,
                                   "acme_router_policies/base.yaml": BASE,
                                   "acme_router_policies/parts/tools.yaml": TOOLS})


def router_script() -> str:
    """The `router` console script of the environment the tests run in."""
    script = Path(sys.executable).parent / "router"
    assert script.is_file(), f"no router console script next to {sys.executable}"
    return str(script)


def run(project: Project, site: Path, *args: str,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([router_script(), *args], cwd=project.root, input=stdin, capture_output=True,
                          text=True, timeout=120, check=False, env={**project.env, "PYTHONPATH": str(site)})


def test_an_installed_pack_uses_its_own_files_and_names_its_distribution(tmp_path: Path, site: Path) -> None:
    project = make_project(tmp_path)
    project.policy("version: 1\nuse: [acme]\n")

    lint = run(project, site, "lint", "--rules")
    explained = run(project, site, "explain", "--event", "-", "--format", "json", stdin=DEPLOY)
    packs = run(project, site, "packs")

    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "RT6" not in lint.stdout + lint.stderr and "site-packages" not in lint.stdout
    assert ("(+ acme-router-policies==2.3.1:base.yaml, acme-router-policies==2.3.1:parts/tools.yaml, "
            "acme-router-policies==2.3.1:acme.yaml via use:)") in lint.stderr + lint.stdout
    assert ["acme-no-force", "pack", "acme-router-policies==2.3.1:parts/tools.yaml:3"] in [
        line.split() for line in lint.stdout.splitlines()]
    decision = json.loads(explained.stdout)
    fired = [r for r in decision["rules"] if r["id"] == "acme-careful"]
    assert fired and fired[0]["origin"] == "acme-router-policies==2.3.1:base.yaml:3"
    origins = {f["display"]: f["origin"] for f in decision["files"] if f["layer"] == "pack"}
    tools = "acme-router-policies==2.3.1:parts/tools.yaml"
    assert origins[tools] == tools
    (row,) = [line for line in packs.stdout.splitlines() if line.startswith("acme")]
    assert "distribution acme-router-policies 2.3.1 (acme_router_policies)" in row


def test_an_installed_packs_file_outside_its_package_directory_is_refused(tmp_path: Path) -> None:
    tmp = tmp_path / "build"
    tmp.mkdir()
    site = build_and_install(tmp, {"acme_router_policies/acme.yaml": """
        version: 1
        use: [./base.yaml, ../outside.yaml, "git+https://example.invalid/p.git@v1#team.yaml"]
    """, "acme_router_policies/base.yaml": BASE})
    (site / "outside.yaml").write_text(dedent(TOOLS))  # a file of site-packages, not of the package
    project = make_project(tmp_path)
    project.policy("version: 1\nuse: [acme]\n")
    (project.root / "outside.yaml").write_text(dedent(TOOLS))  # nor of the project

    lint = run(project, site, "lint", "--rules")

    out = lint.stdout + lint.stderr
    assert ("use '../outside.yaml' refused: ../outside.yaml is outside the package directory of "
            "acme-router-policies 2.3.1") in out
    assert "acme-router-policies==2.3.1:acme.yaml:2:" in out and "[RT104]" in out
    assert "use 'git+https://example.invalid/p.git@v1#team.yaml' refused: the installed pack " \
           "acme-router-policies 2.3.1 names a git source" in out
    rules = [line.split()[0] for line in lint.stdout.splitlines() if line.startswith("  ")]
    assert "acme-careful" in rules and "acme-no-force" not in rules
    assert not list(site.rglob("router.lock")), "nothing is written into the installed package"


def test_the_decision_log_names_the_distribution(tmp_path: Path, site: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from router.load.paths import log_files
    from router.replay.log_files import read_records
    from tests.runtime.test_server import Rig

    monkeypatch.syspath_prepend(str(site))
    rig = Rig(tmp_path, "version: 1\nuse: [acme]\n")
    rig.hello()
    rig.event({"type": "input", "payload": {"text": "deploy now", "source": "rpc"},
               "ctx": {"cwd": str(rig.cwd), "sessionId": "s-1", "model": {"provider": "fake", "id": "m1"}}})

    records: list[dict[str, Any]] = list(read_records(log_files(rig.agent / "router" / "log")))
    assert [(r["id"], r["origin"]) for r in records[0]["rules"] if r["fired"]] == [
        ("acme-careful", "acme-router-policies==2.3.1:base.yaml:3")]
