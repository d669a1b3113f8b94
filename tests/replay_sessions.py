"""Session files and decision logs in Pi's formats, written by tests of `router replay`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JsonDict = dict[str, Any]
PRICED = {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}
FREE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}


def usage(cost: float = 0.0, tokens: int = 1000) -> JsonDict:
    return {"input": tokens, "output": 100, "cacheRead": 0, "cacheWrite": 0, "totalTokens": tokens + 100,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}}


@dataclass
class SessionWriter:
    """Builds one session file entry by entry (timestamps one second apart unless `quick`)."""

    id: str = "s1"
    cwd: str = "/home/user/project"
    entries: list[JsonDict] = field(default_factory=list)
    clock: float = 0.0

    def __post_init__(self) -> None:
        self.entries.append({"type": "session", "version": 3, "id": self.id,
                             "timestamp": self._time(), "cwd": self.cwd})

    def _time(self, step: float = 1.0) -> str:
        self.clock += step
        minutes, seconds = divmod(self.clock, 60)
        return f"2026-01-01T10:{int(minutes):02d}:{seconds:06.3f}Z"

    def add(self, entry: JsonDict, *, quick: bool = False) -> SessionWriter:
        number = len(self.entries)
        self.entries.append({"id": f"e{number}", "parentId": f"e{number - 1}" if number > 1 else None,
                             "timestamp": self._time(0.01 if quick else 1.0), **entry})
        return self

    def model(self, ref: str, *, quick: bool = False) -> SessionWriter:
        provider, _, model_id = ref.partition("/")
        return self.add({"type": "model_change", "provider": provider, "modelId": model_id}, quick=quick)

    def start(self, ref: str = "fake/local", tools: tuple[str, ...] = ("read", "bash", "edit", "write")
              ) -> SessionWriter:
        self.model(ref)
        self.add({"type": "thinking_level_change", "thinkingLevel": "off"})
        return self.message({"role": "system", "content": "", "toolsAdded": [{"name": t} for t in tools]})

    def message(self, message: JsonDict, *, quick: bool = False) -> SessionWriter:
        return self.add({"type": "message", "message": {"timestamp": 0, **message}}, quick=quick)

    def user(self, text: str, *, quick: bool = False) -> SessionWriter:
        return self.message({"role": "user", "content": [{"type": "text", "text": text}]}, quick=quick)

    def assistant(self, ref: str, text: str = "ok", *, calls: list[JsonDict] | None = None,
                  cost: float = 0.0, tokens: int = 1000, stop: str | None = None) -> SessionWriter:
        provider, _, model_id = ref.partition("/")
        content: list[JsonDict] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "toolCall", "id": c.get("id", f"call{i}"), "name": c["name"],
                     "arguments": c.get("arguments", {})} for i, c in enumerate(calls or [])]
        return self.message({"role": "assistant", "content": content, "provider": provider, "model": model_id,
                             "usage": usage(cost, tokens),
                             "stopReason": stop or ("toolUse" if calls else "stop")})

    def result(self, name: str, text: str = "done", call_id: str = "call0") -> SessionWriter:
        return self.message({"role": "toolResult", "toolCallId": call_id, "toolName": name,
                             "content": [{"type": "text", "text": text}], "isError": False})

    def compaction(self, tokens: int = 50000) -> SessionWriter:
        return self.add({"type": "compaction", "summary": "earlier work", "firstKeptEntryId": "none",
                         "tokensBefore": tokens})

    def text(self) -> str:
        return "".join(json.dumps(e) + "\n" for e in self.entries)

    def write(self, directory: Path, name: str | None = None) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / (name or f"2026-01-01T10-00-00-000Z_{self.id}.jsonl")
        path.write_text(self.text())
        return path


def record(session: str, event: str, seq: int, *, fired: tuple[str, ...] = (),
           actions: list[JsonDict] | None = None, signals: JsonDict | None = None) -> JsonDict:
    """One decision record in the shared contract's format (docs/replay.md)."""
    return {"v": 1, "time": "2026-01-01T10:00:00.000Z", "session": session, "event": event, "seq": seq,
            "event_digest": "sha256:00", "policy": "sha256:00",
            "rules": [{"id": r, "origin": "router.yaml:1", "fired": True} for r in fired],
            "actions": actions or [], "signals": signals or {}, "latency_ms": 1.0, "shadow": [],
            "model": None}


def write_log(path: Path, records: list[JsonDict], *, extra_lines: tuple[str, ...] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def write_models(path: Path) -> Path:
    """A Pi models.json: fake/local (loopback, no price), fake/cloud (priced)."""
    def model(model_id: str, cost: JsonDict) -> JsonDict:
        return {"id": model_id, "name": model_id, "reasoning": False, "input": ["text"],
                "contextWindow": 100000, "maxTokens": 4096, "cost": cost}

    data = {"providers": {"fake": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions",
                                   "apiKey": "none",
                                   "models": [model("local", FREE), model("cloud", PRICED)]}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path
