#!/usr/bin/env bash
# Installs the system programs some tests need, where they are missing: tmux (Pi's TUI in a real
# terminal) and Chromium (the HTML report pages, headless). Debian and Ubuntu (apt-get, as root or
# through sudo); elsewhere it says what to install and exits 1. Idempotent.
set -euo pipefail
missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_programs: install ${missing[*]} with your system's package manager" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi
echo "install_programs: installing ${missing[*]}"
"${sudo[@]}" apt-get install -y "${missing[@]}" >/dev/null 2>&1 \
  || { "${sudo[@]}" apt-get update >/dev/null && "${sudo[@]}" apt-get install -y "${missing[@]}" >/dev/null; }
