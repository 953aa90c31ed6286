"""Prometheus metrics of one server, in a registry of its own (two apps in a process never clash)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from orchestrator.api.cluster import Cluster
from orchestrator.pipeline.load_gate import LoadGate
from orchestrator.sandbox import SandboxManager
from orchestrator.sandbox.egress.denials import backend_denials

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TURN_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800)
_FIRST_EVENT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class _SandboxCollector(Collector):
    """`cage_sandboxes{state}` read from the manager's registry at scrape time."""

    def __init__(self, manager: Callable[[], SandboxManager | None]) -> None:
        self._manager = manager

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("cage_sandboxes", "Tracked sandboxes by state.", labels=["state"])
        manager = self._manager()
        counts: Tally[str] = Tally({"busy": 0, "idle": 0, "stopped": 0})
        for box in manager.registry.all() if manager is not None else []:
            counts["stopped" if box.stopped else "busy" if box.busy else "idle"] += 1
        for state, n in sorted(counts.items()):
            family.add_metric([state], n)
        yield family


class _EgressCollector(Collector):
    """`cage_egress_denied_total{mode}`: connections the egress proxy refused for this process's boxes."""

    def __init__(self, manager: Callable[[], SandboxManager | None]) -> None:
        self._manager = manager

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "cage_egress_denied", "Connections the egress proxy refused, by network mode.", labels=["mode"]
        )
        manager = self._manager()
        hub = backend_denials(manager.backend) if manager is not None else None
        for mode in ("allow", "bridge", "none"):
            family.add_metric([mode], hub.counts.get(mode, 0) if hub is not None else 0)
        yield family


class _ClusterCollector(Collector):
    """`cage_replica_leader` and `cage_maintenance_runs_total{job}`: whether this replica leads the
    cluster's upkeep, and how often it ran each leader-only job (zero on the other replicas)."""

    def __init__(self, cluster: Callable[[], Cluster | None]) -> None:
        self._cluster = cluster

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        cluster = self._cluster()
        leader = GaugeMetricFamily("cage_replica_leader", "1 while this replica leads the cluster's upkeep.")
        leader.add_metric([], 1 if cluster is not None and cluster.leader else 0)
        yield leader
        runs = CounterMetricFamily(
            "cage_maintenance_runs", "Leader-only jobs this replica ran, by job.", labels=["job"]
        )
        for job in ("reaper", "volume-gc", "network-gc", "retention"):
            runs.add_metric([job], cluster.runs[job] if cluster is not None else 0)
        yield runs


_Figure = tuple[type[GaugeMetricFamily | CounterMetricFamily], str, str, Callable[[LoadGate], int]]
"""A metric of the door: its family, name, help, and how to read it."""
_GATE_FIGURES: tuple[_Figure, ...] = (
    (GaugeMetricFamily, "cage_turn_gate_limit", "Root turns this server admits at once.", lambda g: g.limit),
    (GaugeMetricFamily, "cage_turn_gate_running", "Root turns holding a place.", lambda g: g.running),
    (GaugeMetricFamily, "cage_turn_gate_waiting", "Root turns waiting at the door.", lambda g: g.waiting),
    (CounterMetricFamily, "cage_turn_gate_waited", "Root turns that waited at the door.", lambda g: g.waited),
    (
        CounterMetricFamily,
        "cage_turn_gate_refused",
        "Root turns refused after waiting too long (429).",
        lambda g: g.refused,
    ),
)


class _GateCollector(Collector):
    """The door of root turns (`LoadGate`): its limit, the turns running and waiting, and how many
    waited or were refused since start (zero without a pipeline)."""

    def __init__(self, gate: Callable[[], LoadGate | None]) -> None:
        self._gate = gate

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        gate = self._gate()
        for family_type, name, doc, read in _GATE_FIGURES:
            family = family_type(name, doc)
            family.add_metric([], read(gate) if gate is not None else 0)
            yield family


class Metrics:
    """Every metric the server exports."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._manager: SandboxManager | None = None
        r = self.registry
        self.requests = Counter(
            "cage_http_requests",
            "HTTP requests by route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.turns = Counter(
            "cage_turns", "Finished turns by runner and status.", ["runner", "status"], registry=r
        )
        self.turn_duration = Histogram(
            "cage_turn_duration_seconds",
            "Turn duration, start to stream_end.",
            ["runner"],
            buckets=_TURN_BUCKETS,
            registry=r,
        )
        self.first_event = Histogram(
            "cage_turn_first_event_seconds",
            "Time from a turn's start to its first event at a client.",
            ["runner"],
            buckets=_FIRST_EVENT_BUCKETS,
            registry=r,
        )
        self.image_builds = Counter(
            "cage_image_builds",
            "Runner image builds started over the API, by runner and result.",
            ["runner", "result"],
            registry=r,
        )
        self.websocket_clients = Gauge(
            "cage_websocket_clients", "Open websocket session connections.", registry=r
        )
        self.rate_limited = Counter(
            "cage_rate_limited", "Requests refused by the per-key rate limit.", registry=r
        )
        r.register(_SandboxCollector(lambda: self._manager))
        r.register(_EgressCollector(lambda: self._manager))
        self._cluster: Cluster | None = None
        r.register(_ClusterCollector(lambda: self._cluster))
        self._gate: LoadGate | None = None
        r.register(_GateCollector(lambda: self._gate))

    def watch_sandboxes(self, manager: SandboxManager) -> None:
        self._manager = manager

    def watch_cluster(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def watch_gate(self, gate: LoadGate) -> None:
        self._gate = gate

    def render(self) -> bytes:
        return generate_latest(self.registry)
