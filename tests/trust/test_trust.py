"""Trust by content: digests, decisions, the store, and the commands that read and write it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.compile.compiler import compile_files
from router.runtime import trust_review as command
from router.runtime.project_content import read_project_content
from router.runtime.session_policy import load_session_policy
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
                   "rules:\n  - id: w\n    on: turn_start\n"
                   "    do: [{log: {file: .pi/router/data/out.log, text: hi}}]\n")
    item = command.review(root, tmp_path / "agent")
    assert item.policy is not None, item.diagnostics
    summary = command.render_summary(item, state="untrusted")
    assert "fs.write: log.file = .pi/router/data/out.log (rule w, " in summary
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


def merge_bomb(links: int = 200) -> str:
    """`links` chained merge keys (6.9 KB for 200): each mapping merges the one before it."""
    lines = ["version: 1", "vars:", "  a0: &a0 {k0: 1}"]
    lines += [f"  a{i}: &a{i} {{<<: [*a{i - 1}], k{i}: 1}}" for i in range(1, links)]
    return "\n".join(lines) + "\n"


def test_untrusted_bytes_are_never_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's decision hashes the files the record lists; no YAML of the project is parsed
    when they differ (never trusted, edited since, an older record without its files)."""
    import router.load.loader as loader

    root, agent = project(tmp_path, merge_bomb()), tmp_path / "agent"
    parsed: list[str] = []
    original = loader.parse_source

    def spying(text: str, path: str) -> object:
        parsed.append(path)
        return original(text, path)

    monkeypatch.setattr(loader, "parse_source", spying)
    records: dict[str, object] = {}
    assert load_session_policy(root, agent, records=records).trust.state == "untrusted"
    (root / ".pi" / "router.yaml").write_text(PROJECT)
    content, _ = read_project_content(root)
    assert content is not None
    parsed.clear()
    (root / ".pi" / "router.yaml").write_text(merge_bomb())
    edited = load_session_policy(root, agent, records={str(root.resolve()): record(content)})
    assert edited.trust.state == "changed" and edited.trust.cause is None
    old = load_session_policy(root, agent, records={str(root.resolve()): {"sha256": content.digest}})
    assert old.trust.state == "changed" and old.trust.cause == "unlisted"
    assert "older router" in (old.trust.message() or "") and "router trust" in (old.trust.message() or "")
    assert not [p for p in parsed if ".pi" in p]
    (root / ".pi" / "router.yaml").write_text(PROJECT)
    trusted = load_session_policy(root, agent, records={str(root.resolve()): record(content)})
    assert trusted.trust.state == "trusted" and [p for p in parsed if p.endswith(".pi/router.yaml")]


def test_precheck_hashes_the_recorded_files_with_bounded_reads(tmp_path: Path) -> None:
    root = project(tmp_path, "use: [./team.yaml]\n" + PROJECT, **{"team.yaml": "rules: []\n"})
    content, _ = read_project_content(root)
    assert content is not None
    records = {str(root.resolve()): record(content)}
    assert precheck(root, records).state == "trusted"
    assert precheck(root, records).checked == frozenset(content.files)
    team = root / ".pi" / "team.yaml"
    team.unlink()
    os.mkfifo(team)  # a FIFO nobody writes to: hashed without blocking, and refused
    assert precheck(root, records).state == "changed"


def test_merge_key_bomb_through_router_trust_is_a_clear_bounded_error(tmp_path: Path) -> None:
    root = project(tmp_path, merge_bomb())
    code, text = command.trust(root, tmp_path / "agent", confirm=lambda _: True)
    assert code == 1 and "[RT101]" in text and "merge keys (<<)" in text and "router lint" in text
    assert not TrustStore(tmp_path / "agent").projects()


def test_a_trusted_project_that_does_not_load_leaves_the_users_layer(tmp_path: Path) -> None:
    """Trusted content that fails to load (here: reading it takes longer than the limit) is off;
    the user's rules stay and the note names why."""
    from router.runtime import session_policy

    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "router.yaml").write_text("rules:\n  - {id: mine, on: input, do: [{notify: x}]}\n")
    root = project(tmp_path, "vars:\n  big: [" + ", ".join(["1"] * 40_000) + "]\n" + PROJECT)
    content, _ = read_project_content(root)
    assert content is not None
    records = {str(root.resolve()): record(content)}
    original = session_policy.PROJECT_SECONDS
    session_policy.PROJECT_SECONDS = 0.0001
    try:
        loaded = load_session_policy(root, agent, records=records)
    finally:
        session_policy.PROJECT_SECONDS = original
    assert loaded.policy is not None and loaded.last_good
    assert [r.id for r in loaded.policy.rules if r.layer == "user"] == ["mine"]
    assert not [r for r in loaded.policy.rules if r.layer == "project"]
    assert loaded.diagnostics[0].code == "RT503" and "is not applied" in loaded.diagnostics[0].message
    assert any(d.code == "RT103" and "took longer" in d.message for d in loaded.diagnostics)
