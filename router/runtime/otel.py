"""OpenTelemetry for the sidecar (the `otel` extra): a span and metrics per decision, over OTLP/HTTP.

Nothing here is imported unless an OTLP endpoint is configured with the standard environment
variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the per-signal `…_TRACES_ENDPOINT` /
`…_METRICS_ENDPOINT`); `OTEL_SDK_DISABLED=true` turns it off. The exporters read the other
standard variables themselves (headers, timeouts, export intervals); the resource is the run's
(`resource_attributes`: service, project, policy, packs), under `OTEL_RESOURCE_ATTRIBUTES` and
`OTEL_SERVICE_NAME`.
Prompt text is never sent: only the record's event type, rule ids, model, tier, latency and
policy hash.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
             "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
SERVICE = "pi-policy-router"
SPAN_NAME = "router.decision"
DECISIONS = "router.decisions"
MODEL_CHOICES = "router.model.choices"
LATENCY = "router.decision.latency"
TURNS = "router.turns"
COST = "router.cost"
UNPRICED = "unknown"  # a turn's price source when its model has no price (counted, not priced)
INSTALL_HINT = "pip install 'pi-policy-router[otel]'"


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for telemetry."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINTS)


def start(environ: Mapping[str, str], detected: Mapping[str, Any] | None = None) -> Telemetry | str:
    """The exporters, or the reason there are none (a warning for the user); `detected`: the
    run's resource attributes (project, policy, packs), below what the environment sets."""
    try:
        return Telemetry(environ, detected or {})
    except ImportError as exc:
        return (f"OpenTelemetry is configured ({_configured(environ)}) but its packages are missing "
                f"({exc.name or exc}): {INSTALL_HINT}")
    except Exception as exc:  # a bad endpoint or header value: the sidecar runs without telemetry
        return f"OpenTelemetry could not start: {type(exc).__name__}: {exc}"


def preload(environ: Mapping[str, str]) -> str | None:
    """Import the SDK and the exporters now (the costly part, at the sidecar's start, before the
    bridge's hello arrives); the reason they cannot be, if any (a warning for the user)."""
    try:
        import opentelemetry.exporter.otlp.proto.http.metric_exporter
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.metrics
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        return (f"OpenTelemetry is configured ({_configured(environ)}) but its packages are missing "
                f"({exc.name or exc}): {INSTALL_HINT}")
    return None


def resource_attributes(environ: Mapping[str, str], detected: Mapping[str, Any]) -> dict[str, Any]:
    """The resource: `service.name` pi-policy-router and `service.version`, then `detected`, then
    `OTEL_RESOURCE_ATTRIBUTES` (`key=value,…`, values percent-encoded), then `OTEL_SERVICE_NAME`:
    what the user sets wins, as the SDK orders them."""
    from router import __version__

    found: dict[str, Any] = {"service.name": SERVICE, "service.version": __version__, **detected}
    for item in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            found[key.strip()] = unquote(value.strip())
    if environ.get("OTEL_SERVICE_NAME", "").strip():
        found["service.name"] = environ["OTEL_SERVICE_NAME"].strip()
    return found


def _configured(environ: Mapping[str, str]) -> str:
    return next(name for name in ENDPOINTS if environ.get(name, "").strip())


class Telemetry:
    """A tracer provider and a meter provider exporting to the configured OTLP/HTTP endpoint."""

    def __init__(self, environ: Mapping[str, str], detected: Mapping[str, Any] | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from router import __version__

        resource = Resource.create(resource_attributes(environ, detected or {}))
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self.meter_provider = MeterProvider(
            resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
        self.tracer = self.tracer_provider.get_tracer("router", __version__)
        meter = self.meter_provider.get_meter("router", __version__)
        self.decisions = meter.create_counter(
            DECISIONS, unit="{decision}", description="decisions, by event type and rule fired")
        self.choices = meter.create_counter(
            MODEL_CHOICES, unit="{decision}", description="decisions by the model (and tier) of the turn")
        self.latency = meter.create_histogram(
            LATENCY, unit="ms", description="time from the event's arrival to its applied decision")
        self.turns = meter.create_counter(
            TURNS, unit="{turn}", description="answered turns, by model and where their price came from")
        self.cost = meter.create_counter(
            COST, unit="USD", description="the cost of the priced turns, by model and price source")

    def decision(self, record: Mapping[str, Any], *, latency_ns: int) -> str | None:
        """Export one decision record; a problem text instead of raising."""
        try:
            self._export(record, latency_ns)
        except Exception as exc:
            return f"OpenTelemetry: a decision could not be exported: {type(exc).__name__}: {exc}"
        return None

    def _export(self, record: Mapping[str, Any], latency_ns: int) -> None:
        event = str(record.get("event") or "")
        fired = [str(r["id"]) for r in record.get("rules") or [] if r.get("fired")]
        model = record.get("model")
        tier = record.get("tier")
        attributes: dict[str, Any] = {
            "router.event": event, "router.rules": fired, "router.latency_ms": record.get("latency_ms"),
            "router.policy": str(record.get("policy") or ""),
            "router.session": str(record.get("session") or ""),
            "router.seq": int(record.get("seq") or 0),
            "router.shadow": [str(s["id"]) for s in record.get("shadow") or []],
        }
        if model:
            attributes["router.model"] = str(model)
        if tier:
            attributes["router.tier"] = str(tier)
        end = time.time_ns()
        span = self.tracer.start_span(SPAN_NAME, start_time=end - latency_ns, attributes=attributes)
        span.end(end_time=end)
        for rule in fired or ["(none)"]:
            self.decisions.add(1, {"router.event": event, "router.rule": rule})
        if model:
            self.choices.add(1, {"router.model": str(model), "router.tier": str(tier or "")})
        self.latency.record(latency_ns / 1e6, {"router.event": event})
        if record.get("tokens") is not None:  # a turn's record (`turn_end`): counted, priced if it can be
            cost, source = record.get("cost"), record.get("price_source")
            priced = {"router.model": str(model or ""), "router.price_source": str(source or UNPRICED)}
            self.turns.add(1, priced)
            if isinstance(cost, (int, float)) and source:
                self.cost.add(float(cost), priced)

    def flush(self, timeout_ms: int) -> None:
        """Export what is pending now (spans, then metrics), waiting at most about `timeout_ms`
        each: before the sidecar answers `shutdown`, so a `pi -p` run that exits right after
        loses nothing."""
        for provider in (self.tracer_provider, self.meter_provider):
            with contextlib.suppress(Exception):  # an unreachable collector: nothing more to do
                provider.force_flush(timeout_millis=timeout_ms)

    def shutdown(self) -> None:
        """Flush what is pending and stop (spans first, then a last metrics export)."""
        for provider in (self.tracer_provider, self.meter_provider):
            with contextlib.suppress(Exception):  # an unreachable collector at exit: nothing to do
                provider.shutdown()
