"""Rule coverage of a `router test` run: the rules its cases and examples exercised, of all the
rules it counts (the policies' own rules; the built-in packs' only with `--packs`), per file."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any


@dataclass(frozen=True)
class FileCoverage:
    """One policy file: how many of its rules there are and how many a test exercised."""

    path: str
    rules: int
    exercised: int

    @property
    def percent(self) -> float:
        return percent(self.exercised, self.rules)


@dataclass(frozen=True)
class Coverage:
    """The run's rule coverage: per file (in the order the files were met) and in all."""

    files: tuple[FileCoverage, ...]

    @property
    def rules(self) -> int:
        return sum(f.rules for f in self.files)

    @property
    def exercised(self) -> int:
        return sum(f.exercised for f in self.files)

    @property
    def percent(self) -> float:
        return percent(self.exercised, self.rules)

    def below(self, minimum: float | None) -> bool:
        """Whether the coverage is under `minimum` percent (exactly: 7 of 9 is under 78)."""
        if minimum is None or not self.rules:
            return False
        return Fraction(self.exercised * 100, self.rules) < Fraction(minimum)

    def lines(self) -> list[str]:
        """`coverage: 7/9 rules (78%)`, then `  team.yaml: 4/5 (80%)` per file."""
        if not self.files:
            return ["coverage: no rules"]
        return [f"coverage: {self.exercised}/{self.rules} rules ({shown(self.percent)})",
                *(f"  {f.path}: {f.exercised}/{f.rules} ({shown(f.percent)})" for f in self.files)]

    def gate_line(self, minimum: float) -> str:
        """The line that says why `--min-coverage` fails the run."""
        return (f"error: rule coverage {self.exercised}/{self.rules} ({self.percent:.1f}%) is below "
                f"--min-coverage {minimum:g}%")

    def to_dict(self) -> dict[str, Any]:
        return {"rules": self.rules, "exercised": self.exercised, "percent": round(self.percent, 1),
                "files": [{"path": f.path, "rules": f.rules, "exercised": f.exercised,
                           "percent": round(f.percent, 1)} for f in self.files]}


def coverage(counted: Iterable[tuple[str, str]], fired: Iterable[str]) -> Coverage:
    """The coverage of the rules `counted` ((file, rule id), each once) given the ids that fired."""
    hit = set(fired)
    per: dict[str, list[int]] = {}
    for path, rule_id in dict.fromkeys(counted):
        tally = per.setdefault(path, [0, 0])
        tally[0] += 1
        tally[1] += rule_id in hit
    return Coverage(tuple(FileCoverage(path, rules, exercised) for path, (rules, exercised) in per.items()))


def percent(part: int, whole: int) -> float:
    """`part` of `whole` in percent; nothing to cover is all of it covered."""
    return 100.0 * part / whole if whole else 100.0


def shown(value: float) -> str:
    """A percentage as the summary shows it: whole numbers, never 100% unless everything is."""
    rounded = round(value)
    if rounded == 100 and value < 100:
        return "99%"
    if rounded == 0 and value > 0:
        return "1%"
    return f"{rounded}%"
