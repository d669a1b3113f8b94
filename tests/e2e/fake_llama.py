"""A fake llama.cpp server in router mode, enough for Pi's ``llama-cpp-classify`` and
``typesafe-system-one`` classifiers (the prompt format of Pi 1.6.0's llama.cpp classifier).

Label probabilities are scripted per question (keyed by a substring of its instructions)
or by a ``FAKE_PROBS[key=p,...]`` marker anywhere in the prompt or state.
"""

from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any

JsonDict = dict[str, Any]

CHOICE_LABELS = [*"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"]
UNDERFLOW_LOGPROB = -1e30
NEWLINE_TOKEN = 10
_MARKER = re.compile(r"FAKE_PROBS\[([^\]]*)\]")
_OPTION = re.compile(r"^([A-Za-z0-9])\. (.*)$", re.MULTILINE)


@dataclass
class Fault:
    """Scripted misbehaviour for one endpoint."""

    status: int | None = None
    body: str = "fake llama.cpp failure"
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class LlamaModel:
    """One entry of ``GET /models``."""

    id: str
    n_ctx: int = 8192
    output_modalities: list[str] = field(default_factory=lambda: ["text"])
    status: str = "loaded"
    chat_template: str = "{{ messages }}"

    def entry(self) -> JsonDict:
        """The router-mode ``/models`` entry Pi reads."""
        return {
            "id": self.id,
            "object": "model",
            "status": {
                "value": self.status,
                "args": ["llama-server", "--ctx-size", str(self.n_ctx)],
            },
            "architecture": {
                "input_modalities": ["text"],
                "output_modalities": self.output_modalities,
            },
            "meta": {"n_ctx": self.n_ctx},
        }


def _default_models() -> list[LlamaModel]:
    return [LlamaModel("chat-small"), LlamaModel("decide-1", output_modalities=["decisions"])]


@dataclass
class LlamaScript:
    """What the fake llama.cpp server answers. Tests mutate it between requests."""

    models: list[LlamaModel] = field(default_factory=_default_models)
    probs: dict[str, dict[str, float]] = field(default_factory=dict)
    """Instructions substring -> ``{option key or label: probability}``; first match wins.
    Bool questions take ``true``/``false`` or ``Yes``/``No``; scores take level digits."""
    faults: dict[str, Fault] = field(default_factory=dict)
    """Endpoint path (``/completion``, ``/tokenize``, ``/v1/systemone``, ...) -> fault."""
    drop_labels: set[str] = field(default_factory=set)
    """Labels (or option keys) left out of ``top_logprobs``."""


@dataclass
class Question:
    """The question a classify prompt ends with."""

    instructions: str
    kind: str  # "choice" | "bool" | "score"
    labels: list[str]
    keys: list[str]


def parse_question(prompt: str) -> Question | None:
    """Parse the final ``Question:`` block of a classify prompt (as Pi 1.6.0 writes it)."""
    start = prompt.rfind("Question: ")
    if start < 0:
        return None
    block = prompt[start + len("Question: ") :]
    instructions = block.split("\n\n", 1)[0].strip()
    if "Answer Yes or No." in block:
        return Question(instructions, "bool", ["Yes", "No"], ["true", "false"])
    options = _OPTION.findall(block)
    if "Answer with one level number." in block:
        labels = [label for label, _ in options]
        return Question(instructions, "score", labels, labels)
    keys = [text.split(": ", 1)[0] for _, text in options]
    return Question(instructions, "choice", [label for label, _ in options], keys)


def parse_marker(text: str) -> dict[str, float] | None:
    """The last ``FAKE_PROBS[a=0.8,b=0.2]`` marker in ``text``, if any."""
    found = _MARKER.findall(text)
    if not found:
        return None
    pairs = (item.split("=", 1) for item in found[-1].split(",") if "=" in item)
    return {key.strip(): float(value) for key, value in pairs}


def _names(question: Question) -> set[str]:
    return {*question.keys, *question.labels, *(label.lower() for label in question.labels)}


def _scripted(question: Question, script: LlamaScript, text: str) -> dict[str, float]:
    """The marker wins when it names this question's options; then ``script.probs``."""
    marker = parse_marker(text)
    if marker is not None and _names(question) & marker.keys():
        return marker
    for needle, probs in script.probs.items():
        if needle in question.instructions:
            return probs
    return {}


def label_probabilities(question: Question, script: LlamaScript, text: str) -> dict[str, float]:
    """Probability per label. Unscripted labels share what is left (uniform by default)."""
    scripted = _scripted(question, script, text)
    given: dict[str, float] = {}
    for label, key in zip(question.labels, question.keys, strict=True):
        for name in (key, label, label.lower()):
            if name in scripted:
                given[label] = scripted[name]
                break
    rest = [label for label in question.labels if label not in given]
    share = max(0.0, 1.0 - sum(given.values())) / len(rest) if rest else 0.0
    return {label: given.get(label, share) for label in question.labels}


def logprob(p: float) -> float:
    """``ln(p)``, with llama-server's underflow value for zero."""
    return math.log(p) if p > 0 else UNDERFLOW_LOGPROB


class Tokenizer:
    """A consistent fake tokenizer: ``\\n`` is token 10, any other text is one stable token."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[str, int] = {}

    def token(self, text: str) -> int:
        """The stable id of ``text`` as a single token."""
        with self._lock:
            return self._ids.setdefault(text, 1000 + len(self._ids))

    def tokenize(self, content: str) -> list[int]:
        """``"\\n"`` -> [10], ``"\\nX"`` -> [10, id(X)], ``"X"`` -> [id(X)]."""
        if content.startswith("\n"):
            return [NEWLINE_TOKEN, *self.tokenize(content[1:])]
        return [self.token(content)] if content else []


def render_template(messages: list[JsonDict]) -> str:
    """A chat-template stand-in that keeps every message's text."""
    parts = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"<|{message.get('role', 'user')}|>\n{content}\n")
    return "".join(parts) + "<|assistant|>\n"


class LlamaBackend:
    """Answers the llama.cpp endpoints. ``handle`` returns None for paths it does not own."""

    GET_PATHS = ("/models", "/props")
    POST_PATHS = ("/tokenize", "/apply-template", "/completion", "/v1/systemone")

    def __init__(self, script: LlamaScript | None = None) -> None:
        self.script = script or LlamaScript()
        self.tokenizer = Tokenizer()

    def owns(self, method: str, path: str) -> bool:
        """Whether ``method path`` is a llama.cpp endpoint."""
        return path in (self.GET_PATHS if method == "GET" else self.POST_PATHS)

    def fault(self, path: str) -> Fault | None:
        """The scripted fault for ``path``, if any."""
        return self.script.faults.get(path)

    def handle(self, method: str, path: str, query: dict[str, str], body: JsonDict) -> JsonDict:
        """The JSON answer for one request to an owned path."""
        if path == "/models":
            return {"object": "list", "data": [m.entry() for m in self.script.models]}
        if path == "/props":
            return self._props(query.get("model"))
        if path == "/tokenize":
            return {"tokens": self.tokenizer.tokenize(str(body.get("content", "")))}
        if path == "/apply-template":
            return {"prompt": render_template(body.get("messages", []))}
        if path == "/completion":
            return self._completion(str(body.get("prompt", "")))
        return self._systemone(body)

    def _props(self, model_id: str | None) -> JsonDict:
        model = next((m for m in self.script.models if m.id == model_id), None)
        if model is None:
            return {"models_autoload": False, "role": "router"}
        return {
            "model_alias": model.id,
            "chat_template": model.chat_template,
            "default_generation_settings": {"n_ctx": model.n_ctx},
        }

    def _completion(self, prompt: str) -> JsonDict:
        question = parse_question(prompt)
        top: list[JsonDict] = []
        if question is not None:
            probs = label_probabilities(question, self.script, prompt)
            dropped = self.script.drop_labels
            for label, key in zip(question.labels, question.keys, strict=True):
                if label in dropped or key in dropped:
                    continue
                token = self.tokenizer.token(label)
                top.append(
                    {"id": token, "token": label, "logprob": logprob(probs[label]), "bytes": []}
                )
        return {
            "content": "",
            "completion_probabilities": [{"id": 0, "token": "", "top_logprobs": top}],
        }

    def _systemone(self, body: JsonDict) -> JsonDict:
        state_text = json.dumps(body.get("state", {}))
        answers = {
            qid: self._decide(question, state_text)
            for qid, question in (body.get("questions") or {}).items()
        }
        return {"answers": answers, "usage": {"input_tokens": 10, "output_tokens": 1}}

    def _decide(self, spec: JsonDict, state_text: str) -> JsonDict:
        kind = spec.get("type")
        instructions = str(spec.get("instructions", ""))
        criteria = spec.get("criteria") or {}
        if kind == "noul":
            question = Question(instructions, "bool", ["Yes", "No"], ["true", "false"])
        elif kind == "score":
            labels = [str(i) for i in range(len(criteria))]
            question = Question(instructions, "score", labels, labels)
        else:
            keys = list(criteria)
            question = Question(instructions, "choice", CHOICE_LABELS[: len(keys)], keys)
        probs = list(label_probabilities(question, self.script, state_text).values())
        return _decision_answer(question, probs)


def _confidence(probs: list[float]) -> float:
    n = len(probs)
    return min(1.0, max(0.0, (n * max(probs) - 1) / (n - 1))) if n > 1 else 1.0


def _decision_answer(question: Question, probs: list[float]) -> JsonDict:
    if question.kind == "bool":
        return {"type": "noul", "noul": probs[0]}
    if question.kind == "score":
        score = sum(i * p for i, p in enumerate(probs))
        return {"type": "score", "score": score, "confidence": _confidence(probs)}
    best = max(range(len(probs)), key=probs.__getitem__)
    return {
        "type": "choice",
        "choice": question.keys[best],
        "probabilities": dict(zip(question.keys, probs, strict=True)),
        "confidence": _confidence(probs),
    }
