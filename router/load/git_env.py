"""The environment and configuration the router's `git` runs with (docs/security.md, "Git sources").

Honoured, as the user set them up: the system and global gitconfig (`http.*`, `credential.*`,
`url.*.insteadOf`, `core.sshCommand`, …), every variable that is not git's own (`HTTPS_PROXY`,
`SSL_CERT_FILE`, `HOME`, …) and the git variables an https or ssh fetch needs (`PASSED`). Dropped:
every other `GIT_*` variable, those that would point git at another repository, index or object
store (`GIT_DIR`, `GIT_INDEX_FILE`, … as a pre-commit hook sets them), inject configuration
(`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`), switch TLS verification off or write traces into the
messages the router shows. Always: no prompt (terminal, askpass, credential manager dialogs, ssh),
no hook, no fsmonitor, no protocol but https, ssh and file, and the working directory `/` so the
repository a command runs in never lends its `.git/config`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

from router.load.git_spec import redact_text

PASSED = frozenset({
    # TLS: the CA bundle, client certificates (paths; a key's passphrase is never prompted for)
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_SSL_CERT", "GIT_SSL_KEY", "GIT_SSL_CERT_PASSWORD_PROTECTED",
    "GIT_SSL_VERSION", "GIT_SSL_CIPHER_LIST",
    # proxies (HTTPS_PROXY and the others are not git's variables: they pass anyway)
    "GIT_HTTP_PROXY_AUTHMETHOD", "GIT_PROXY_SSL_CAINFO", "GIT_PROXY_SSL_CERT", "GIT_PROXY_SSL_KEY",
    "GIT_PROXY_SSL_CERT_PASSWORD_PROTECTED", "GIT_HTTP_USER_AGENT",
    # which configuration files: the user's choice of global and system file
    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
    # ssh, and where git's own programs are (relocatable installations)
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_EXEC_PATH",
})

FORCED = {
    "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "", "GCM_INTERACTIVE": "never",
    "LC_ALL": "C", "GIT_ALLOW_PROTOCOL": "https:ssh:file",
}
"""Set whatever the user's environment says: nothing prompts, only these protocols are spoken."""

PROTECT = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never",
           "-c", "credential.interactive=false")
"""Before every git command: no hook runs, no fsmonitor, never `ext::`, no credential dialog."""

BATCH_SSH = "ssh -o BatchMode=yes"
WORKDIR = "/"
CONFIG_TIMEOUT_S = 10.0  # reading the user's gitconfig is local: a hang is not worth a fetch's time
MAX_LINES = 20
MAX_CHARS = 2000


def git_env(environ: Mapping[str, str], ssh_configured: bool) -> dict[str, str]:
    """The environment of the router's git: `environ` filtered (PASSED, and what is not git's) and
    FORCED. ssh gets BatchMode unless the user chose their ssh (a variable, or `core.sshCommand`)."""
    env = {k: v for k, v in environ.items() if not k.startswith("GIT_") or k in PASSED}
    env.update(FORCED)
    if not (ssh_configured or "GIT_SSH_COMMAND" in env or "GIT_SSH" in env):
        env["GIT_SSH_COMMAND"] = BATCH_SSH
    return env


def ssh_configured(exe: str, environ: Mapping[str, str], timeout: float) -> bool:
    """Whether the user's system or global gitconfig sets `core.sshCommand` (run in WORKDIR, so
    no repository's own config answers)."""
    env = git_env(environ, ssh_configured=True)
    try:
        done = subprocess.run([exe, *PROTECT, "config", "--get", "core.sshCommand"], env=env, cwd=WORKDIR,
                              capture_output=True, timeout=min(timeout, CONFIG_TIMEOUT_S),
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def git_message(stderr: bytes, returncode: int) -> str:
    """What git said, whole: every line (blank ones dropped) joined with `; `, credentials in URLs
    replaced, at most MAX_LINES lines and MAX_CHARS characters (then how much was left out)."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return f"exit {returncode}"
    shown = redact_text("; ".join(lines[:MAX_LINES]))
    more = len(lines) - MAX_LINES
    if len(shown) > MAX_CHARS:
        shown = shown[:MAX_CHARS].rstrip() + " …"
    return shown + (f" ({more} more lines)" if more > 0 else "")

