"""A project consumes a pinned team policy from git, in a real Pi 1.6.0 with the bridge.

The team repository is real (served as git+file://). `router lint` pins it in `.pi/router.lock`,
`router trust` trusts the project with the locked content; the team's rule then shapes what
reaches the provider. A moved tag changes nothing until `router update`, after which the project
waits for the user's trust again and Pi says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import helpers_router
from tests.e2e.helpers_router import BUILTIN, RouterRig, write_policy
from tests.gitrepo import make_repo

pytestmark = pytest.mark.e2e
rig = helpers_router.rig


def test_a_trusted_project_runs_the_pinned_team_rule_until_an_update_needs_trust_again(
        rig: RouterRig) -> None:
    repo = make_repo(rig.tmp / "repos")
    write_policy(rig.work / ".pi" / "router.yaml", f'use: ["{repo.source()}"]\n')
    locked = rig.router("lint")
    assert locked.returncode == 0, locked.stdout + locked.stderr
    trusted = rig.router("trust", "--yes")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr

    first = rig.print("review")

    assert first.returncode == 0, first.stderr
    assert rig.fake.chat_requests()[0].tools == ["read"]  # team-read-only, from the team repository
    assert "not applied" not in first.stderr

    repo.write("team.yaml", """
        version: 1
        rules:
          - id: team-read-only
            on: input
            when: "text == 'review'"
            do:
              - tools: {only: [read, bash]}
    """)
    repo.commit("v1 moved", tag="v1")
    second = rig.print("review")
    assert second.returncode == 0, second.stderr
    assert rig.fake.chat_requests()[1].tools == ["read"]  # the lock decides, not the moved tag

    updated = rig.router("update")
    assert updated.returncode == 0, updated.stderr
    assert "~ rule team-read-only" in updated.stdout and "router trust" in updated.stdout
    third = rig.print("review")
    assert set(rig.fake.chat_requests()[2].tools) >= BUILTIN
    assert "changed since you trusted it" in third.stderr


def test_a_tampered_cache_entry_is_named_in_pi_with_its_fix_not_as_a_change_of_trust(rig: RouterRig) -> None:
    repo = make_repo(rig.tmp / "repos")
    write_policy(rig.work / ".pi" / "router.yaml", f'use: ["{repo.source()}"]\n')
    assert rig.router("lint").returncode == 0
    assert rig.router("trust", "--yes").returncode == 0
    [cached] = (Path(rig.env["XDG_CACHE_HOME"]) / "pi-policy-router" / "git").glob("*/trees/*/team.yaml")
    cached.write_text(cached.read_text().replace("only: [read]", "only: [read, bash]"))

    done = rig.print("review")

    assert done.returncode == 0, done.stderr
    assert set(rig.fake.chat_requests()[0].tools) >= BUILTIN  # the team's rule is not applied
    assert f"the cached copy of team.yaml of git+{repo.url}@v1" in done.stderr
    assert "does not match" in done.stderr and "`router lint`" in done.stderr
    assert "changed since you trusted it" not in done.stderr
