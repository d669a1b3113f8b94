"""Trust by content: digests, decisions, the store, and the commands that read and write it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.compile.compiler import compile_files
from router.runtime import trust_review as command
from router.runtime.session_policy import load_session_policy, read_project_content
from router.trust.store import (
    ProjectContent,
    TrustStore,
    TrustStoreError,
    decide,
    file_digest,
    precheck,
    project_content,
)

PROJECT = "rules:\n  - {id: p, on: turn_start, do: [{notify: x}]}\n"


def project(tmp_path: Path, text: str = PROJECT, **more: str) -> Path:
    root = tmp_path / "proj"
    (root / ".pi").mkdir(parents=True)
    (root / ".pi" / "router.yaml").write_text(text)
    for name, body in more.items():
        (root / ".pi" / name).write_text(body)
    return root


def record(content: ProjectContent) -> dict[str, object]:
    """A trust record as `TrustStore.trust` writes it: the digest and the files it covers."""
    return {"sha256": content.digest, "files": [name for name, _ in content.files]}


def test_digest_covers_every_used_file_and_its_name(tmp_path: Path) -> None:
    root = project(tmp_path, "use: [./team.yaml]\n" + PROJECT, **{"team.yaml": "rules: []\n"})
    content, diagnostics = read_project_content(root)
    assert content is not None and not diagnostics
    assert [name for name, _ in content.files] == [".pi/team.yaml", ".pi/router.yaml"]
    (root / ".pi" / "team.yaml").write_text("rules: []\n# changed\n")
    changed, _ = read_project_content(root)
    assert changed is not None and changed.digest != content.digest


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_different_content_never_shares_a_digest(first: bytes, second: bytes) -> None:
    root = Path("/p")
    a = project_content(root, [(root / ".pi" / "router.yaml", file_digest(first))])
    b = project_content(root, [(root / ".pi" / "router.yaml", file_digest(second))])
    assert (a.digest == b.digest) == (first == second)


def test_decide_states(tmp_path: Path) -> None:
    root = project(tmp_path)
    content, _ = read_project_content(root)
    assert content is not None
    assert decide(None, root, {}).state == "none"
    assert decide(content, root, {}).state == "untrusted"
    assert decide(content, root, {}, approve=True).state == "approved"
    assert decide(content, root, {str(root.resolve()): {"sha256": "0" * 64}}).state == "changed"
    trusted = decide(content, root, {str(root.resolve()): {"sha256": content.digest}})
    assert trusted.state == "trusted" and trusted.applies and trusted.message() is None
    assert "router trust" in (decide(content, root, {}).message() or "")


def test_store_round_trip_is_private_and_keyed_by_real_path(tmp_path: Path) -> None:
    root = project(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(root)
    content, _ = read_project_content(link)
    assert content is not None and content.root == root.resolve()
    store = TrustStore(tmp_path / "agent")
    store.trust(content)
    assert (store.path.stat().st_mode & 0o777) == 0o600
    assert store.projects()[str(root.resolve())]["sha256"] == content.digest
    assert store.untrust(link) and not store.untrust(link)


def test_unreadable_store_is_never_overwritten(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "agent")
    store.path.parent.mkdir(parents=True)
    store.path.write_text("{not json")
    content, _ = read_project_content(project(tmp_path))
    assert content is not None
    with pytest.raises(TrustStoreError, match=r"trust.json:1:2: not valid JSON"):
        store.trust(content)
    assert store.path.read_text() == "{not json" and store.records() == {}


def test_session_policy_applies_project_only_when_trusted(tmp_path: Path) -> None:
    root, agent = project(tmp_path), tmp_path / "agent"
    loaded = load_session_policy(root, agent, records={})
    assert loaded.trust.state == "untrusted" and loaded.policy is not None
    assert "turn_start" not in loaded.policy.event_types
    content, _ = read_project_content(root)
    assert content is not None
    records = {str(root.resolve()): record(content)}
    for _ in range(2):  # compiled, then from the cache
        again = load_session_policy(root, agent, records=records)
        assert again.trust.state == "trusted" and again.policy is not None
        assert "turn_start" in again.policy.event_types


def test_project_data_files_are_pinned_with_the_project_policy(tmp_path: Path) -> None:
    """A user layer's `project_data` makes those project files part of the trusted content: a
    change, a new file or a removed one needs trust again, from the cache too."""
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "router.yaml").write_text("version: 1\nproject_data: [.pi/data.json]\n")
    root = project(tmp_path, **{"data.json": '{"a": 1}'})
    content, _ = read_project_content(root, agent)
    assert content is not None
    assert [name for name, _ in content.files] == [".pi/router.yaml", ".pi/data.json"]
    records = {str(root.resolve()): record(content)}
    for _ in range(2):  # compiled, then from the cache
        loaded = load_session_policy(root, agent, records=records)
        assert loaded.trust.state == "trusted"
        assert root / ".pi" / "data.json" in loaded.watched
    (root / ".pi" / "data.json").write_text('{"a": 2}')
    assert load_session_policy(root, agent, records=records).trust.state == "changed"
    (root / ".pi" / "data.json").unlink()
    assert load_session_policy(root, agent, records=records).trust.state == "changed"
    bare, _ = read_project_content(root, agent)
    assert bare is not None
    without = {str(root.resolve()): record(bare)}
    assert load_session_policy(root, agent, records=without).trust.state == "trusted"
    (root / ".pi" / "data.json").write_text("{}")  # appears after the policy was trusted and cached
    assert load_session_policy(root, agent, records=without).trust.state == "changed"


def test_project_data_must_stay_inside_the_project() -> None:
    from router.load.model import Policy

    for name in ("/etc/passwd", "../x.json", "~/x.json", ""):
        with pytest.raises(ValueError, match="not a path inside the project"):
            Policy.model_validate({"project_data": [name]})


def test_a_broken_untrusted_project_file_is_reported_not_parsed_into_the_policy(tmp_path: Path) -> None:
    root = project(tmp_path, "rules: [\n")
    loaded = load_session_policy(root, tmp_path / "agent", records={})
    assert loaded.trust.state == "untrusted" and loaded.policy is not None and not loaded.diagnostics


def test_trust_command_refuses_a_broken_policy_and_records_a_good_one(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    broken = project(tmp_path, "rules:\n  - {id: p, on: inptu, do: [{notify: x}]}\n")
    code, text = command.trust(broken, agent, confirm=lambda _: True)
    assert code == 1 and "has errors" in text and "RT205" in text
    (broken / ".pi" / "router.yaml").write_text(PROJECT)
    shown: list[str] = []
    code, text = command.trust(broken, agent, confirm=lambda summary: shown.append(summary) or True)
    assert code == 0 and "Pi applies it from now on" in text
    assert "p: on turn_start; do notify" in shown[0] and "content sha256: " in shown[0]
    assert command.trust(broken, agent, confirm=lambda _: False)[1].endswith("already trusted: nothing to do")
    listed = command.list_trusted(agent)[1]
    assert str(broken.resolve()) in listed and "(unchanged)" in listed


def test_trust_summary_lists_capabilities(tmp_path: Path) -> None:
    root = project(tmp_path, "env: [HOME]\nsignals:\n  secret: {read: {file: .pi/x}, fallback: \"''\"}\n"
                   "rules:\n  - id: w\n    on: turn_start\n    do: [{log: {file: out.log, text: hi}}]\n")
    item = command.review(root, tmp_path / "agent")
    assert item.policy is not None, item.diagnostics
    summary = command.render_summary(item, state="untrusted")
    assert "fs.write: log.file = out.log (rule w, " in summary
    assert "fs.read: read.file = .pi/x (signal secret" in summary
    assert "refused (1; they stay refused in Pi, the rest applies):" in summary
    assert "env HOME: events carry HOME only when your router.yaml grants it" in summary


def test_project_layer_may_not_set_user_vars(tmp_path: Path) -> None:
    pack = tmp_path / "pack.yaml"
    pack.write_text("vars: {power: false}\nuser_vars: {power: lets the pack do X}\n")
    user = tmp_path / "user.yaml"
    user.write_text("vars: {power: true}\n")
    proj = tmp_path / "proj.yaml"
    proj.write_text("vars: {power: true}\n")
    policy, _ = compile_files([("pack", pack), ("project", proj)])
    assert policy is not None and policy.vars["power"] is False
    [refused] = [r for r in policy.refused if r.code == "RT124"]
    assert refused.span is not None and refused.span.line == 1 and "ignored" in refused.reason
    assert "var 'power' of the project policy refused" in refused.warning()
    policy, diagnostics = compile_files([("pack", pack), ("user", user)])
    assert policy is not None and policy.vars["power"] is True
    assert [d.code for d in diagnostics] == ["RT316"] and "lets the pack do X" in diagnostics[0].message


def test_store_file_format(tmp_path: Path) -> None:
    root = project(tmp_path)
    content, _ = read_project_content(root)
    assert content is not None
    TrustStore(tmp_path / "agent").trust(content)
    data = json.loads((tmp_path / "agent" / "router" / "trust.json").read_text())
    record = data["projects"][str(root.resolve())]
    assert data["version"] == 1 and record["files"] == [".pi/router.yaml"] and record["trusted_at"]


def test_summary_shows_overrides_and_escapes_control_characters(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "router.yaml").write_text(
        "vars: {limit: 5}\nrules:\n  - {id: guard, on: input, do: [{notify: mine}]}\n"
        "  - {id: no-force-push, on: input, do: [{notify: mine}]}\n")
    root = project(tmp_path, "disable: [no-force-push]\nvars: {limit: 50}\nrules:\n"
                   "  - {id: guard, on: input, do: [{notify: \"\\e[2K\\e[1Afake\"}]}\n")
    item = command.review(root, agent)
    assert item.policy is not None, item.diagnostics
    summary = command.render_summary(item, state="untrusted")
    assert "switches off rules: no-force-push" in summary
    assert "replaces rules: guard (~" in summary or "replaces rules: guard (" in summary
    assert "overrides vars: limit" in summary
    assert "\x1b" not in summary


def test_review_digest_and_summary_come_from_one_read(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The file swapped between two reads would make the summary describe other bytes."""
    import router.load.source as source

    root = project(tmp_path)
    reads: list[Path] = []
    original = source.read_text

    def counting(path: Path, **kwargs: object) -> object:
        reads.append(path)
        return original(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(source, "read_text", counting)
    import router.load.loader as loader

    monkeypatch.setattr(loader, "read_text", counting)
    item = command.review(root, tmp_path / "agent")
    assert item.content is not None and item.policy is not None
    assert sum(1 for p in reads if p.name == "router.yaml" and ".pi" in p.parts) == 1
