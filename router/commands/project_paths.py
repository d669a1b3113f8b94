"""Writing into a project a repository may have brought: never through a symbolic link it made.

A cloned repository can commit `.pi` (or any file or folder in it) as a link to a file or folder
of the user's; a command that writes `.pi/…` through it would write there instead.
"""

from __future__ import annotations

from pathlib import Path


def link_on_the_way(path: Path, root: Path) -> Path | None:
    """The first of `path` and its folders below `root` that is a symbolic link, else None."""
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def refusal(paths: list[Path], root: Path, command: str) -> str | None:
    """Why `command` writes none of `paths` (a link on the way to one of them), else None."""
    for path in paths:
        link = link_on_the_way(path, root)
        if link is not None:
            return (f"error: {link} is a symbolic link; {command} writes only real files and folders "
                    "of the project (nothing was written)")
    return None
