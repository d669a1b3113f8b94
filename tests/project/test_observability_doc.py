"""docs/observability.md's OpenTelemetry Collector configuration for a team parses, every pipeline
names only components it defines, and it groups by the resource attributes the sidecar sends."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from router.runtime.observer import resource_of

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "observability.md"
SECTION = "### A collector for a team"


def collector_config() -> dict[str, Any]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    block = re.search(r"^```yaml\n(.*?)^```$", section, re.S | re.M)
    assert block is not None, "no ```yaml block under " + SECTION
    data = YAML(typ="safe").load(block.group(1))
    assert isinstance(data, dict)
    return data


def test_the_team_collector_configuration_parses_and_is_wired_up() -> None:
    config = collector_config()
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces", "metrics"}
    for name, pipeline in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            assert pipeline[kind], f"{name} has no {kind}"
            missing = set(pipeline[kind]) - set(config[kind])
            assert not missing, f"pipeline {name} names undefined {kind}: {sorted(missing)}"
        assert pipeline["processors"][0] == "memory_limiter" and pipeline["processors"][-1] == "batch"


def test_it_groups_by_the_project_attributes_the_sidecar_sends() -> None:
    from router.compile.ir import CompiledPolicy

    keys = collector_config()["processors"]["groupbyattrs/project"]["keys"]
    empty = CompiledPolicy(rules=(), by_event={}, vars={}, env_vars={}, signals={})
    sent = resource_of(empty, {"name": "shop-api", "digest": "5d41402abc4b"}, "sha256:00")
    assert set(keys) <= set(sent)
