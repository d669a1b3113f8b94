"""A platform team's week, end to end, with installed `router` console scripts and real git
repositories on disk (docs/teams.md walks the same week and quotes this module's output).

Machine one: a team repository with releases v1..v3 (`team.yaml` uses `./base.yaml`;
`team.test.yaml` tests them), a project pinned to the tag `v3` and one pinned to v3's commit, both
committed with their lock. The administrator installs a managed layer whose locked rule keeps text
about secrets on the local model; it is in force in both projects, and the tag project's attempt
to disable it is refused (RT609). The team releases v4 (a var and a rule change) after reviewing
it with `router diff main:team.yaml team.yaml`; `router update` moves the tag project to v4 and
leaves the commit project where it is; the project's pull request, reviewed with `router diff
HEAD:.pi/router.yaml .pi/router.yaml --format markdown`, shows the decisions the release changes
and the locked one it cannot (the secret turn stays local), and is committed.

Machine two: another HOME and another virtual environment with its own `router` console script
clones the project. Offline with an empty cache, `router explain` fails with RT125 and the fix;
back online `router lint` fetches the locked commit (the lock unchanged), the pull request's diff
is the same as on machine one, and `router doctor` says the project is not trusted until
`router trust` there.

The commits' contents, dates and authors are docs/teams.md's, so the hashes are the same on every
run and the markdown is the one the document shows (its console examples, run by
tests/project/test_docs_examples.py, make the same week). The machines are built once per module
(module-scoped fixtures that record every command's result); the tests read the records.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.gitrepo import GIT_ENV
from tests.replay_sessions import SessionWriter, write_models

ROOT = Path(__file__).resolve().parent.parent.parent
ROUTER = Path(sys.executable).parent / "router"
TEAMS_DOC = ROOT / "docs" / "teams.md"
DOC_COMMAND = ("$ ROUTER_MANAGED_DIR=~/managed router diff HEAD:.pi/router.yaml .pi/router.yaml \\\n"
               ">   --sessions ~/sessions --models ~/models.json -f markdown\n")
MANAGED_BLOCK = "```yaml file=~/managed/router.yaml lint=RT609\n"
SECRET = '{"type": "input", "text": "rotate the secret of the export endpoint"}'
REVIEW = '{"type": "input", "text": "review the parser"}'

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

MANAGED = """\
version: 1
rules:
  - id: org-secrets-stay-local
    description: Text about secrets stays on this machine's model, whatever a project says.
    locked: true
    on: input
    group: model
    when: "count_keywords(text, ['secret', 'password', 'token']) > 0"
    do: [{model: fake/local}]
"""


@dataclass
class Machine:
    """One machine of the week: its home, its environment and the `router` console script it runs."""

    home: Path
    env: dict[str, str]
    router_script: Path = ROUTER
    seen: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def run(self, *args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """The installed console script (or `git`), as the user's shell runs it."""
        program = [str(self.router_script), *args[1:]] if args[0] == "router" else list(args)
        closed = subprocess.DEVNULL if stdin is None else None
        return subprocess.run(program, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=300,
                              check=False, input=stdin, stdin=closed)

    def record(self, name: str, *args: str, cwd: Path, stdin: str | None = None) -> None:
        """Run `router ARGS` and keep its result under `name` for the tests."""
        self.seen[name] = self.run("router", *args, cwd=cwd, stdin=stdin)

    def explain(self, name: str, event: str, *, cwd: Path) -> None:
        """`router explain` of one event, its matched rules, kept under `name`."""
        self.record(name, "explain", "--event", "-", "--mode", "matched", cwd=cwd, stdin=event)

    def router(self, *args: str, cwd: Path, code: int = 0) -> str:
        done = self.run("router", *args, cwd=cwd)
        assert done.returncode == code, f"router {' '.join(args)}: exit {done.returncode}\n{both(done)}"
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
        """`text` with machine one's home written as the docs' `/home/user`."""
        return text.replace(str(self.home), "/home/user")


@dataclass
class Week:
    """Machine one after the week, with what its commands said; `team` is the team repository."""

    one: Machine
    team: Path
    tagged: Path
    pinned: Path
    commits: dict[str, str]
    recorded: Path


def both(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def machine_env(home: Path) -> dict[str, str]:
    """A user's environment on a machine whose home is `home` (no variable of this test run leaks)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_", "ROUTER_"))}
    env.update({**GIT_ENV, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / ".pi" / "agent"),
                "XDG_CACHE_HOME": str(home / ".cache"), "ROUTER_MANAGED_DIR": str(home / "managed"),
                "NO_COLOR": "1", "COLUMNS": "100"})
    return env


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def release(week: Machine, team: Path, tag: str) -> str:
    words, tools = RELEASES[tag]
    write(team / "team.yaml", TEAM.format(words=words, tools=tools))
    commit = week.commit(f"team policies {tag}", cwd=team, day=int(tag[1:]))
    week.git("tag", tag, cwd=team)
    return commit


def sessions(where: Path) -> Path:
    """A recorded session of the project: an endpoint to add (easy so far), a secret of it to
    rotate (the managed layer's), a review."""
    (SessionWriter(id="0190f3a2-week").start("fake/local")
     .user("add an endpoint for the export").assistant("fake/local", "done")
     .user("rotate the secret of the export endpoint").assistant("fake/local", "rotated")
     .user("review the parser").assistant("fake/local", "looks fine")).write(where / "sessions")
    write_models(where / "models.json")
    return where / "sessions"




@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> Week:
    """Machine one, Monday to Friday: the team's releases, two projects, the managed layer, v4."""
    home = tmp_path_factory.mktemp("week") / "home"
    home.mkdir()
    one = Machine(home, machine_env(home))
    team = home / "team-policies"
    team.mkdir()
    one.git("init", "-q", "-b", "main", cwd=team)
    write(team / "base.yaml", BASE)
    write(team / "team.test.yaml", TESTS)
    commits = {tag: release(one, team, tag) for tag in ("v1", "v2", "v3")}
    one.record("team test", "test", "team.test.yaml", cwd=team)
    week = Week(one, team, home / "project", home / "api", commits, sessions(home))
    for project, ref in ((week.tagged, "v3"), (week.pinned, commits["v3"])):
        write(project / ".pi" / "router.yaml", f'version: 1\nuse: ["git+file://{team}@{ref}#team.yaml"]\n')
        one.git("init", "-q", "-b", "main", cwd=project)
        one.record(f"lint {project.name}", "lint", cwd=project)
        one.commit("the team policy at v3", cwd=project, day=4)
    install_the_managed_layer(week)
    release_v4(week)
    return week


def install_the_managed_layer(week: Week) -> None:
    """The administrator's layer, then the tag project's attempt to disable its locked rule."""
    one = week.one
    write(Path(one.env["ROUTER_MANAGED_DIR"]) / "router.yaml", MANAGED)
    one.explain("secret api v3", SECRET, cwd=week.pinned)
    policy = week.tagged / ".pi" / "router.yaml"
    committed = policy.read_text()
    policy.write_text(committed + "disable: [org-secrets-stay-local]\n")
    one.record("attempt lint", "lint", cwd=week.tagged)
    one.explain("secret project v3", SECRET, cwd=week.tagged)  # with the attempt in place
    policy.write_text(committed)


def release_v4(week: Week) -> None:
    """The team's pull request for v4 reviewed against main and tagged; both projects updated; the
    tag project's pull request reviewed in markdown and committed."""
    one, team = week.one, week.team
    one.git("checkout", "-qb", "more-hard-words", cwd=team)
    words, tools = RELEASES["v4"]
    write(team / "team.yaml", TEAM.format(words=words, tools=tools))
    one.record("team review", "diff", "main:team.yaml", "team.yaml", "--sessions", str(week.recorded),
               "--models", str(one.home / "models.json"), cwd=team)
    week.commits["v4"] = one.commit("v4: endpoints are hard, reviews only read", cwd=team, day=5)
    one.git("checkout", "-q", "main", cwd=team)
    one.git("merge", "-q", "--ff-only", "more-hard-words", cwd=team)
    one.git("tag", "v4", cwd=team)
    one.record("update tagged", "update", cwd=week.tagged)
    one.record("update pinned", "update", cwd=week.pinned)
    one.record("pull request", "diff", "HEAD:.pi/router.yaml", ".pi/router.yaml", "--sessions",
               str(week.recorded), "--models", str(one.home / "models.json"), "--format", "markdown",
               cwd=week.tagged)
    for project in (week.tagged, week.pinned):
        one.explain(f"secret {project.name} after", SECRET, cwd=project)
    week.commits["project v4"] = one.commit("the team policy at v4", cwd=week.tagged, day=6)
    one.record("trust", "trust", "--yes", cwd=week.tagged)


@pytest.fixture(scope="module")
def laptop(week: Week) -> Machine:
    """Machine two: another home, its own virtual environment and `router`, the project cloned."""
    home = week.one.home / "laptop"
    two = Machine(home, machine_env(home), second_venv(home / "venv"))
    two.env["PATH"] = f"{two.router_script.parent}{os.pathsep}{two.env.get('PATH', os.defpath)}"
    week.one.git("clone", "-q", str(week.tagged), str(home / "project"), cwd=week.one.home)
    write(Path(two.env["ROUTER_MANAGED_DIR"]) / "router.yaml", MANAGED)
    project = home / "project"
    away = week.team.with_name("team-policies.away")
    week.team.rename(away)  # offline: the team's repository is out of reach
    try:
        two.explain("offline explain", REVIEW, cwd=project)
    finally:
        away.rename(week.team)
    two.seen["offline status"] = two.run("git", "status", "--porcelain", cwd=project)
    two.record("lint", "lint", cwd=project)
    two.seen["status"] = two.run("git", "status", "--porcelain", cwd=project)
    two.record("pull request", "diff", "HEAD~1:.pi/router.yaml", ".pi/router.yaml", "--sessions",
               str(week.recorded), "--models", str(week.one.home / "models.json"), "--format", "markdown",
               cwd=project)
    two.explain("secret", SECRET, cwd=project)
    two.record("doctor", "doctor", cwd=project)
    two.record("trust", "trust", "--yes", cwd=project)
    return two


def second_venv(where: Path) -> Path:
    """A separate virtual environment with its own `router` console script, made the cheap way: a
    venv without pip whose `.pth` puts this checkout on its path and reads the pinned dependencies
    from this test's environment (a `pip install` of the same files, less the 10 s of a build);
    the script is the one pip writes, its interpreter the new venv's."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    write(Path(purelib) / "pi_policy_router.pth", f"{ROOT}\nimport site; site.addsitedir({ours!r})\n")
    script = where / "bin" / "router"
    write(script, f"#!{python}\nimport sys\nfrom router.commands.entry import main\n"
                  "if __name__ == '__main__':\n    sys.exit(main())\n")
    script.chmod(0o755)
    return script


def test_the_team_repository_tests_its_release(week: Week) -> None:
    assert "PASS: 2/2" in week.one.seen["team test"].stdout, both(week.one.seen["team test"])
    for project in ("project", "api"):
        assert "Found 0 errors" in week.one.seen[f"lint {project}"].stdout


def test_the_managed_layer_is_in_force_on_both_projects_across_the_release(week: Week) -> None:
    for name in ("secret project v3", "secret api v3", "secret project after", "secret api after"):
        done = week.one.seen[name]
        assert done.returncode == 0, both(done)
        assert "~/managed/router.yaml:3  [managed, locked] rule org-secrets-stay-local: enter" \
            in done.stdout, name
        assert done.stdout.rstrip().endswith(
            "1. switch model to fake/local  <- rule org-secrets-stay-local (~/managed/router.yaml:3)"), name
        assert "policy: default pack, ~/managed/router.yaml, .pi/router.yaml (+ " in done.stdout


def test_the_projects_attempt_to_disable_the_locked_rule_is_refused(week: Week) -> None:
    lint, explained = week.one.seen["attempt lint"], week.one.seen["secret project v3"]
    assert lint.returncode == 1
    assert (".pi/router.yaml:3:11: error: disable 'org-secrets-stay-local' refused: it disables the locked "
            "rule 'org-secrets-stay-local' of the managed policy (~/managed/router.yaml) [RT609]") \
        in lint.stdout
    assert explained.returncode == 0, both(explained)
    assert "decision: 1 action from rule org-secrets-stay-local" in explained.stdout
    assert "[managed, locked] rule org-secrets-stay-local: enter" in explained.stdout


def test_the_teams_pull_request_is_reviewed_against_main(week: Week) -> None:
    review = week.one.seen["team review"]
    assert review.returncode == 1, both(review)
    assert "does not compile" not in review.stdout and "3 turns, 2 changed" in review.stdout, review.stdout
    assert "  ~ rule team-review-read-only (team.yaml:6)" in review.stdout
    assert "managed: ~/managed/router.yaml (locked: org-secrets-stay-local), under both sides" \
        in review.stdout


def test_router_update_moves_the_tag_project_and_leaves_the_commit_pin(week: Week) -> None:
    one, v3, v4 = week.one, week.commits["v3"], week.commits["v4"]
    done = one.seen["update tagged"]
    assert done.returncode == 0, both(done)
    lines = one.shown(done.stdout).splitlines()
    source = "git+file:///home/user/team-policies"
    assert lines[0] == f"{source}@v3 -> @v4: {v3[:7]} -> {v4[:7]} (.pi/router.lock)"
    assert f"  ~ rule team-review-read-only (/home/user/team-policies@{v4[:7]}:team.yaml:6)" in lines
    assert any(line.startswith('  ~ var hard_words: ["architecture", "refactor", "design"] -> ') and
               line.endswith("(read by: team-cloud-for-hard)") for line in lines), lines
    assert f"dropped {source}@v3 from .pi/router.lock (no policy file uses it)" in lines
    committed = one.git("show", "HEAD:.pi/router.yaml", cwd=week.tagged)
    assert committed == f'version: 1\nuse: ["git+file://{week.team}@v4#team.yaml"]'
    lock = one.git("show", "HEAD:.pi/router.lock", cwd=week.tagged)
    assert "@v4\"" in lock and "@v3\"" not in lock and v4 in lock
    changed = one.git("show", "--name-only", "--format=", "HEAD", cwd=week.tagged).splitlines()
    assert changed == [".pi/router.lock", ".pi/router.yaml"]
    stays = one.seen["update pinned"]
    assert f"pinned to commit {v3}: stays" in stays.stdout, both(stays)
    assert one.git("status", "--porcelain", cwd=week.pinned) == ""


def test_the_projects_pull_request_shows_the_changed_decisions_and_the_locked_one(week: Week) -> None:
    done = week.one.seen["pull request"]
    assert done.returncode == 1, both(done)
    markdown = week.one.shown(done.stdout)
    assert "3 turns replayed, **2 changed**" in markdown
    assert ("Both sides run under the managed policy `~/managed/router.yaml` "
            "(locked: org-secrets-stay-local).") in markdown
    assert "| `0190f3a2-week` | 1 | model | fake/local | fake/cloud | +$0.004500 |" in markdown
    assert "| 2 | model |" not in markdown and "| 2 | tools |" not in markdown  # the secret turn stays
    assert "| `0190f3a2-week` | 3 | tools | read,bash | read | +$0.0000 |" in markdown
    assert "| `hard_words` |" in markdown and "`team-cloud-for-hard` |" in markdown
    assert "| `team-review-read-only` | changed |" in markdown
    check_the_docs(markdown)


def test_a_second_machine_offline_with_an_empty_cache_is_told_the_cause_and_the_fix(laptop: Machine) -> None:
    done = laptop.seen["offline explain"]
    assert done.returncode == 1 and "[RT125]" in both(done), both(done)
    said = " ".join(both(done).split())
    assert "does not appear to be a git repository" in said
    assert "help: check that this machine reaches the repository" in said
    assert laptop.seen["offline status"].stdout == ""  # nothing of the clone was written


def test_a_second_machine_fetches_the_locked_commit_and_decides_the_same(week: Week, laptop: Machine) -> None:
    lint = laptop.seen["lint"]
    assert lint.returncode == 0 and "Found 0 errors" in lint.stdout, both(lint)
    assert "fetching git+file://" in lint.stderr and "locked " not in lint.stderr  # the lock decides
    assert laptop.seen["status"].stdout == ""
    assert (laptop.home / ".cache" / "pi-policy-router" / "git").is_dir()
    mine = laptop.seen["pull request"]
    assert mine.returncode == 1, both(mine)
    theirs = week.one.seen["pull request"].stdout.replace("`HEAD:", "`HEAD~1:", 1)
    assert mine.stdout == theirs
    assert laptop.seen["secret"].returncode == 0, both(laptop.seen["secret"])
    decision = laptop.seen["secret"].stdout.split("decision:", 1)[1]
    assert decision == week.one.seen["secret project after"].stdout.split("decision:", 1)[1]


def test_a_second_machines_doctor_says_what_is_not_trusted_and_its_trust_is_the_same(
        week: Week, laptop: Machine) -> None:
    doctor = laptop.seen["doctor"].stdout
    project = laptop.home / "project"
    assert (f"warn project trust: {project}/.pi/router.yaml is not applied: its content is not trusted; "
            f"review it, then run `router trust {project}`") in doctor, doctor
    assert f"sidecar from: {laptop.home}/venv/bin/python" in doctor
    assert "ok   policy: " in doctor and "~/managed/router.yaml" in doctor
    mine, theirs = laptop.seen["trust"], week.one.seen["trust"]
    assert mine.returncode == 0 and theirs.returncode == 0, both(mine) + both(theirs)
    assert f"trusted {project}/.pi/router.yaml (sha256 " in mine.stdout and "Pi applies it" in mine.stdout
    digest = theirs.stdout.split("(sha256 ", 1)[1].split(")", 1)[0]
    assert f"(sha256 {digest})" in mine.stdout  # the same content on both machines: git files by commit


def check_the_docs(markdown: str) -> None:
    """docs/teams.md shows this very markdown as the output of its pull request's `router diff`, and
    this managed policy."""
    text = TEAMS_DOC.read_text(encoding="utf-8")
    assert MANAGED_BLOCK + MANAGED in text, "docs/teams.md shows another managed policy than this week's"
    assert DOC_COMMAND in text, f"docs/teams.md no longer runs {DOC_COMMAND.strip()}"
    shown = text.split(DOC_COMMAND, 1)[1].split("```", 1)[0]
    assert shown.rstrip("\n") == markdown.rstrip("\n"), (
        "docs/teams.md shows another markdown: regenerate it (ROUTER_UPDATE_DOCS=1 python3 -m pytest "
        "tests/project/test_docs_examples.py -k teams) and check that this week still matches it")
