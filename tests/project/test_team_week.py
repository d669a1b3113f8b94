"""A platform team's week, end to end, with the installed `router` console script and real git
repositories on disk (docs/teams.md walks the same week and quotes this test's output).

A team repository with releases v1..v3 (`team.yaml` uses `./base.yaml`; `team.test.yaml` tests
them), a project pinned to the tag `v3` and one pinned to v3's commit, both committed with their
lock. The team releases v4 (a var and a rule change) after reviewing it with `router diff
main:team.yaml team.yaml`; `router update` moves the tag project to v4 (the `use:` entry and the
lock rewritten, v3's entry dropped, the changed var and rule named) and leaves the commit project
where it is; the project's pull request, reviewed with `router diff HEAD:.pi/router.yaml
.pi/router.yaml --format markdown`, shows the decisions the release changes (exit 1).

The commits' contents, dates and authors are docs/teams.md's, so the hashes are the same on every
run and the markdown is the one the document shows (its console examples, run by
tests/project/test_docs_examples.py, make the same week).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.gitrepo import GIT_ENV
from tests.replay_sessions import SessionWriter, write_models

ROOT = Path(__file__).resolve().parent.parent.parent
ROUTER = Path(sys.executable).parent / "router"
TEAMS_DOC = ROOT / "docs" / "teams.md"
DOC_COMMAND = ("$ router diff HEAD:.pi/router.yaml .pi/router.yaml --sessions ~/sessions "
               "--models ~/models.json -f markdown\n")

TEAM = """\
version: 1
use: [./base.yaml]
vars:
  hard_words: [{words}]
rules:
  - id: team-review-read-only
    description: What a review may use.
    on: input
    when: "starts_with(text, 'review')"
    do:
      - tools: {{only: [{tools}]}}
  - id: team-cloud-for-hard
    on: input
    group: model
    when: "count_keywords(text, vars.hard_words) > 0"
    do: [{{model: fake/cloud}}]
  - id: team-local-otherwise
    on: input
    group: model
    do: [{{model: fake/local}}]
"""

BASE = """\
version: 1
rules:
  - id: team-no-force-push
    on: tool_call
    match: "tool.name == 'bash' && contains(tool.input.command, '--force')"
    do: [{block: "force pushes are not allowed; open a pull request"}]
"""

TESTS = """\
cases:
  - name: a review gets read only
    event: {type: input, text: review the parser}
    expect: {fired: [team-review-read-only, team-local-otherwise]}
  - name: a force push is blocked
    event: {type: tool_call, tool: {name: bash, input: {command: git push --force}}}
    expect: {fired: [team-no-force-push]}
"""

RELEASES = {  # tag -> (hard words, the tools of a review)
    "v1": ("architecture", "read, bash"),
    "v2": ("architecture, refactor", "read, bash"),
    "v3": ("architecture, refactor, design", "read, bash"),
    "v4": ("architecture, refactor, design, endpoint", "read"),
}


@dataclass
class Week:
    """The machine of the week: a home with the team repository and the projects in it."""

    home: Path
    env: dict[str, str]

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """The installed console script (or `git`), as the user's shell runs it."""
        program = [str(ROUTER), *args[1:]] if args[0] == "router" else list(args)
        return subprocess.run(program, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=120,
                              check=False, stdin=subprocess.DEVNULL)

    def router(self, *args: str, cwd: Path, code: int = 0) -> str:
        done = self.run("router", *args, cwd=cwd)
        shown = f"router {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        assert done.returncode == code, shown
        return done.stdout

    def git(self, *args: str, cwd: Path) -> str:
        done = self.run("git", *args, cwd=cwd)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def commit(self, message: str, *, cwd: Path, day: int) -> str:
        """Commit everything on a fixed day of January 2025 (so every run makes the same hashes)."""
        date = f"2025-01-{day:02d}T00:00:00Z"
        self.env.update({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        self.git("add", "-A", cwd=cwd)
        self.git("commit", "-qm", message, cwd=cwd)
        return self.git("rev-parse", "HEAD", cwd=cwd)

    def shown(self, text: str) -> str:
        """`text` with this machine's home written as the docs' `/home/user`."""
        return text.replace(str(self.home), "/home/user")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def release(week: Week, team: Path, tag: str) -> str:
    words, tools = RELEASES[tag]
    write(team / "team.yaml", TEAM.format(words=words, tools=tools))
    commit = week.commit(f"team policies {tag}", cwd=team, day=int(tag[1:]))
    week.git("tag", tag, cwd=team)
    return commit


def sessions(where: Path) -> Path:
    """A recorded session of the project: an endpoint to add (easy so far), a review."""
    (SessionWriter(id="0190f3a2-week").start("fake/local")
     .user("add an endpoint for the export").assistant("fake/local", "done")
     .user("review the parser").assistant("fake/local", "looks fine")).write(where / "sessions")
    write_models(where / "models.json")
    return where / "sessions"


@pytest.fixture
def week(tmp_path: Path) -> Week:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_", "ROUTER_"))}
    env.update({**GIT_ENV, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / ".pi" / "agent"),
                "XDG_CACHE_HOME": str(home / ".cache"), "NO_COLOR": "1", "COLUMNS": "100"})
    return Week(home, env)


def test_the_week_of_a_team_release_reviewed_in_the_pull_requests(week: Week) -> None:
    team = week.home / "team-policies"
    team.mkdir()
    week.git("init", "-q", "-b", "main", cwd=team)
    write(team / "base.yaml", BASE)
    write(team / "team.test.yaml", TESTS)
    commits = {tag: release(week, team, tag) for tag in ("v1", "v2", "v3")}
    assert "PASS: 2/2" in week.router("test", "team.test.yaml", cwd=team)

    # Two projects: one follows the releases (@v3), one pinned to v3's commit; each commits its lock.
    tagged, pinned = week.home / "project", week.home / "api"
    for project, ref in ((tagged, "v3"), (pinned, commits["v3"])):
        write(project / ".pi" / "router.yaml", f'version: 1\nuse: ["git+file://{team}@{ref}#team.yaml"]\n')
        week.git("init", "-q", "-b", "main", cwd=project)
        assert "Found 0 errors" in week.router("lint", cwd=project)
        week.commit("the team policy at v3", cwd=project, day=4)
    recorded = sessions(week.home)

    # The team's pull request for v4, reviewed against main: the multi-file repository compiles.
    week.git("checkout", "-qb", "more-hard-words", cwd=team)
    words, tools = RELEASES["v4"]
    write(team / "team.yaml", TEAM.format(words=words, tools=tools))
    review = week.run("router", "diff", "main:team.yaml", "team.yaml", "--sessions", str(recorded),
                      "--models", str(week.home / "models.json"), cwd=team)
    assert review.returncode == 1, review.stdout + review.stderr
    assert "does not compile" not in review.stdout and "2 changed" in review.stdout, review.stdout
    assert "  ~ rule team-review-read-only (team.yaml:6)" in review.stdout
    week.commit("v4: endpoints are hard, reviews only read", cwd=team, day=5)
    week.git("checkout", "-q", "main", cwd=team)
    week.git("merge", "-q", "--ff-only", "more-hard-words", cwd=team)
    week.git("tag", "v4", cwd=team)
    v4 = week.git("rev-parse", "v4", cwd=team)

    # Monday in the tag project: `router update` moves to v4 and says what the release changes.
    updated = week.shown(week.router("update", cwd=tagged))
    lines = updated.splitlines()
    assert lines[0] == (f"git+file:///home/user/team-policies@v3 -> @v4: {commits['v3'][:7]} -> {v4[:7]} "
                        "(.pi/router.lock)")
    assert f"  ~ rule team-review-read-only (/home/user/team-policies@{v4[:7]}:team.yaml:6)" in lines
    assert any(line.startswith('  ~ var hard_words: ["architecture", "refactor", "design"] -> ') and
               line.endswith("(read by: team-cloud-for-hard)") for line in lines), updated
    assert ("dropped git+file:///home/user/team-policies@v3 from .pi/router.lock (no policy file uses it)"
            in lines)
    assert (tagged / ".pi" / "router.yaml").read_text() == (
        f'version: 1\nuse: ["git+file://{team}@v4#team.yaml"]\n')
    lock = (tagged / ".pi" / "router.lock").read_text()
    assert "@v4\"" in lock and "@v3\"" not in lock and v4 in lock
    assert week.git("diff", "--name-only", cwd=tagged).splitlines() == [".pi/router.lock", ".pi/router.yaml"]
    stays = week.shown(week.router("update", cwd=pinned))
    assert f"pinned to commit {commits['v3']}: stays" in stays
    assert week.git("status", "--porcelain", cwd=pinned) == ""

    # The project's pull request: the old side is HEAD's tree and the lock committed there.
    done = week.run("router", "diff", "HEAD:.pi/router.yaml", ".pi/router.yaml", "--sessions", str(recorded),
                    "--models", str(week.home / "models.json"), "--format", "markdown", cwd=tagged)
    assert done.returncode == 1, done.stdout + done.stderr
    markdown = week.shown(done.stdout)
    assert "**2 changed**" in markdown
    assert "| `0190f3a2-week` | 1 | model | fake/local | fake/cloud | +$0.004500 |" in markdown
    assert "| `0190f3a2-week` | 2 | tools | read,bash | read | +$0.0000 |" in markdown
    assert "| `hard_words` |" in markdown and "`team-cloud-for-hard` |" in markdown
    assert "| `team-review-read-only` | changed |" in markdown
    check_the_docs(markdown)


def check_the_docs(markdown: str) -> None:
    """docs/teams.md shows this very markdown as the output of its pull request's `router diff`."""
    text = TEAMS_DOC.read_text(encoding="utf-8")
    assert DOC_COMMAND in text, f"docs/teams.md no longer runs {DOC_COMMAND.strip()}"
    shown = text.split(DOC_COMMAND, 1)[1].split("```", 1)[0]
    assert shown.rstrip("\n") == markdown.rstrip("\n"), (
        "docs/teams.md shows another markdown: regenerate it (ROUTER_UPDATE_DOCS=1 python3 -m pytest "
        "tests/project/test_docs_examples.py -k teams) and check that this week still matches it")
