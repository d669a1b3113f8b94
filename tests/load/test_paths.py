"""router.load.paths: readable paths, the agent dir, the built-in packs and the default policy layers."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.load import paths


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A home directory and a working directory (outside home), as (home, cwd)."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    return home, work


def test_display_path_under_cwd_is_relative(places: tuple[Path, Path]) -> None:
    _, work = places
    assert paths.display_path(work / "a" / "router.yaml") == "a/router.yaml"
    assert paths.display_path(Path("b/c.yaml")) == "b/c.yaml"


def test_display_path_normalizes_dot_dot(places: tuple[Path, Path]) -> None:
    _, work = places
    assert paths.display_path(work / "a" / ".." / "b.yaml") == "b.yaml"
    assert paths.display_path(Path("x/./y/../z.yaml")) == "x/z.yaml"
    assert paths.display_path(work / ".." / "home" / "p.yaml") == "~/p.yaml"


def test_display_path_under_home_uses_tilde(places: tuple[Path, Path]) -> None:
    home, _ = places
    assert paths.display_path(home / ".pi" / "agent" / "router.yaml") == "~/.pi/agent/router.yaml"


def test_display_path_elsewhere_is_absolute(places: tuple[Path, Path], tmp_path: Path) -> None:
    assert paths.display_path(tmp_path / "other" / "p.yaml") == str(tmp_path / "other" / "p.yaml")


def test_display_path_cwd_under_home_prefers_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path / "proj")
    assert paths.display_path(tmp_path / "proj" / ".pi" / "router.yaml") == ".pi/router.yaml"
    assert paths.display_path(tmp_path / "other.yaml") == "~/other.yaml"


def test_display_path_home_itself_is_tilde(places: tuple[Path, Path]) -> None:
    home, _ = places
    assert paths.display_path(home) == "~"


def test_agent_dir_default_under_home(places: tuple[Path, Path]) -> None:
    home, _ = places
    assert paths.agent_dir({}) == home / ".pi" / "agent"
    assert paths.agent_dir({"PI_CODING_AGENT_DIR": ""}) == home / ".pi" / "agent"


def test_agent_dir_from_environment_expands_tilde(places: tuple[Path, Path], tmp_path: Path) -> None:
    home, _ = places
    assert paths.agent_dir({"PI_CODING_AGENT_DIR": str(tmp_path / "ag")}) == tmp_path / "ag"
    assert paths.agent_dir({"PI_CODING_AGENT_DIR": "~/agents/one"}) == home / "agents" / "one"


def test_agent_dir_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "from-env"))
    assert paths.agent_dir() == tmp_path / "from-env"


def test_packs_dir_holds_the_built_in_packs() -> None:
    assert (paths.packs_dir() / "default.yaml").is_file()
    assert paths.pack_names() == sorted(paths.pack_names())
    assert {"default", "decision", "deepseek", "cuttle"} <= set(paths.pack_names())
    assert not any(name.endswith(".test") for name in paths.pack_names())


def test_layer_paths_only_the_default_pack_when_nothing_exists(tmp_path: Path) -> None:
    layers = paths.layer_paths(tmp_path, agent=tmp_path / "agent")
    assert layers == [("pack", paths.packs_dir() / "default.yaml")]


def test_layer_paths_user_and_project_when_present(tmp_path: Path) -> None:
    agent, cwd = tmp_path / "agent", tmp_path / "proj"
    (cwd / ".pi").mkdir(parents=True)
    agent.mkdir()
    (agent / "router.yaml").write_text("version: 1\n")
    (cwd / ".pi" / "router.yaml").write_text("version: 1\n")
    assert [name for name, _ in paths.layer_paths(cwd, agent=agent)] == ["pack", "user", "project"]
    assert paths.layer_paths(cwd, agent=agent)[1:] == [("user", agent / "router.yaml"),
                                                      ("project", cwd / ".pi" / "router.yaml")]


def test_layer_paths_project_left_out_when_not_included(tmp_path: Path) -> None:
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "router.yaml").write_text("version: 1\n")
    layers = paths.layer_paths(tmp_path, agent=tmp_path / "agent", include_project=False)
    assert [name for name, _ in layers] == ["pack"]


def test_layer_paths_directory_named_router_yaml_is_not_a_layer(tmp_path: Path) -> None:
    (tmp_path / ".pi" / "router.yaml").mkdir(parents=True)
    (tmp_path / "agent" / "router.yaml").mkdir(parents=True)
    assert [name for name, _ in paths.layer_paths(tmp_path, agent=tmp_path / "agent")] == ["pack"]


def test_project_policy_above_finds_the_nearest_parents_file(tmp_path: Path) -> None:
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    (inner / "src" / "deep").mkdir(parents=True)
    assert paths.project_policy_above(inner / "src") is None
    for root in (outer, inner):
        (root / ".pi").mkdir()
        (root / ".pi" / "router.yaml").write_text("version: 1\n")
    assert paths.project_policy_above(inner / "src" / "deep") == inner / ".pi" / "router.yaml"
    assert paths.project_policy_above(inner / "src") == inner / ".pi" / "router.yaml"
    assert paths.project_policy_above(inner) is None  # it has its own: nothing above is missed
    assert [name for name, _ in paths.layer_paths(inner / "src", agent=tmp_path / "agent")] == ["pack"]


KEY = b"k" * 32


def test_a_projects_identity_is_its_plain_name_and_a_keyed_digest_of_its_resolved_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import hmac

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    root = tmp_path / "work" / "shop-api"
    root.mkdir(parents=True)
    (tmp_path / "link").symlink_to(root)
    found = paths.project_identity(str(root), KEY)
    keyed = hmac.new(KEY, paths.PROJECT_DIGEST_DOMAIN + str(root.resolve()).encode(), hashlib.sha256)
    assert found == {"name": "shop-api", "digest": keyed.hexdigest()[:12]}
    assert paths.project_identity(str(tmp_path / "link"), KEY) == found  # the resolved root
    home = paths.project_identity(str(tmp_path / "home"), KEY)
    assert home is not None and home["name"] == "~"
    for odd in (".secret-plans", "two words", "x" * 65, "naïve"):
        (tmp_path / odd).mkdir()
        other = paths.project_identity(str(tmp_path / odd), KEY)
        assert other is not None and other["name"] is None and len(other["digest"] or "") == 12
    assert paths.project_identity("", KEY) is None and paths.project_identity(None, KEY) is None


def test_a_project_digest_does_not_confirm_a_guessed_path_without_the_key(tmp_path: Path) -> None:
    """A record whose name was left out (a hidden directory) does not let anyone who guesses the
    path confirm it by hashing it: the digest is keyed, and another key gives another digest."""
    import hashlib

    root = tmp_path / "x" / ".acme-merger"
    root.mkdir(parents=True)
    found = paths.project_identity(str(root), KEY)
    assert found is not None and found["name"] is None
    path = str(root.resolve()).encode()
    unkeyed = {hashlib.sha256(path).hexdigest()[:12], hashlib.sha256(path + b"/").hexdigest()[:12],
               hashlib.sha256(paths.PROJECT_DIGEST_DOMAIN + path).hexdigest()[:12]}
    assert found["digest"] not in unkeyed
    assert paths.project_identity(str(root), KEY) == found  # the same key: the same digest
    assert paths.project_identity(str(root), b"o" * 32) != found
