"""Egress policy, squid rendering and denial parsing (pure), and the manager's isolation of a box."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from orchestrator.dsl.sandbox import ComputerSpec, NetworkAllowlist, SandboxSpec, parse_allow_entry
from orchestrator.errors import SandboxError
from orchestrator.sandbox.docker import egress as docker_egress
from orchestrator.sandbox.docker import netns
from orchestrator.sandbox.docker import proxy as docker_proxy
from orchestrator.sandbox.egress.denials import Denial, EgressDenials, parse_line
from orchestrator.sandbox.egress.squid import FRONT_PORTS, EgressClient, render
from orchestrator.sandbox.images import default_images_dir
from orchestrator.sandbox.manager import SandboxManager, SandboxRequest
from orchestrator.sandbox.network import (
    EgressPolicy,
    egress_policy,
    gateway_base_url,
    in_ranges,
    proxy_env,
    sandbox_egress,
)
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder


@pytest.mark.parametrize(
    ("entry", "host", "wildcard", "network", "port"),
    [
        ("api.openai.com", "api.openai.com", False, None, None),
        ("*.GitHub.com", "github.com", True, None, None),
        ("pypi.org:443", "pypi.org", False, None, 443),
        ("1.2.3.4", None, False, "1.2.3.4/32", None),
        ("1.2.3.4:8080", None, False, "1.2.3.4/32", 8080),
        ("10.1.0.0/16", None, False, "10.1.0.0/16", None),
    ],
)
def test_allow_entries_parse(
    entry: str, host: str | None, wildcard: bool, network: str | None, port: int | None
) -> None:
    parsed = parse_allow_entry(entry)
    assert (parsed.host, parsed.wildcard, parsed.network, parsed.port) == (host, wildcard, network, port)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("169.254.169.254", "link-local"),
        ("127.0.0.1:80", "loopback"),
        ("169.254.0.0/15", "link-local"),
        ("*", "not a host name"),
        ("host:0", "port"),
        ("host:70000", "port"),
        ("a b", "not a host name"),
    ],
)
def test_bad_allow_entries_are_refused_by_the_dsl(entry: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        NetworkAllowlist(allow=(entry,))


def test_policy_keys_round_trip() -> None:
    for network in ("none", "bridge", NetworkAllowlist(allow=("a.example", "*.b.example:443", "10.0.0.0/8"))):
        policy = egress_policy(network)
        assert EgressPolicy.from_key(policy.key()) == policy
    with pytest.raises(ValueError, match="not an egress policy"):
        EgressPolicy.from_key("allow:")


def test_only_allowlists_or_the_setting_isolate() -> None:
    assert sandbox_egress(ComputerSpec(network="bridge"), isolated=False) is None
    assert sandbox_egress(ComputerSpec(network="none"), isolated=True) == EgressPolicy(mode="none")
    listed = sandbox_egress(ComputerSpec(network=NetworkAllowlist(allow=("x.example",))), isolated=False)
    assert listed is not None and listed.mode == "allow"
    # a box that publishes ports is isolated too (its relay publishes them), or stays shared when off
    ported = ComputerSpec.model_validate({"ports": [3000]})
    assert sandbox_egress(ported, isolated=True) == EgressPolicy(mode="bridge")
    assert sandbox_egress(ported, isolated=False) is None


def test_ports_next_to_an_allowlist_are_refused() -> None:
    with pytest.raises(ValidationError, match="cannot publish ports"):
        ComputerSpec.model_validate({"ports": [3000], "network": {"allow": ["x.example"]}})


def test_proxy_env_has_both_spellings_and_bypasses_the_gateway() -> None:
    env = proxy_env()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        assert env[name] == env[name.lower()]
    assert "cage-gateway" in env["NO_PROXY"].split(",") and env["HTTPS_PROXY"] == "http://cage-egress:3128"
    assert gateway_base_url() == "http://cage-gateway:8089"
    assert in_ranges("169.254.169.254", ("169.254.0.0/16",)) and not in_ranges("8.8.8.8", ("10.0.0.0/8",))


EGRESS_IMAGE_DIR = default_images_dir() / "egress"


def _config(*, front: bool = True) -> str:
    allow = egress_policy(NetworkAllowlist(allow=("allowed.test:8080", "*.example.com", "203.0.113.7")))
    return render(
        [
            EgressClient("a-net", ("10.213.0.16/28",), allow, "host.docker.internal:4000"),
            EgressClient("b-net", ("10.213.0.32/28",), egress_policy("bridge"), "host.docker.internal:4000"),
            EgressClient("c-net", ("10.213.0.48/28",), egress_policy("none")),
        ],
        never=("10.213.0.0/16",),
        front=front,
    )


def test_the_docker_render_is_unchanged() -> None:
    golden = Path(__file__).parents[2] / "golden" / "egress" / "squid-docker.conf"
    assert _config() == golden.read_text()


def _ports(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("http_port", "proxy_protocol_access"))]


def _rules(text: str) -> list[str]:
    ports = set(_ports(text))
    return [line for line in text.splitlines() if line not in ports]


def test_behind_the_front_squid_listens_on_loopback_for_proxy_protocol_from_loopback_only() -> None:
    assert _ports(_config()) == [
        "http_port 127.0.0.1:13128 name=forward require-proxy-header",
        "http_port 127.0.0.1:18089 accel defaultsite=cage-gateway name=gateway require-proxy-header",
        "proxy_protocol_access allow localhost",
        "proxy_protocol_access deny all",
    ]
    assert _ports(_config(front=False)) == [
        "http_port 3128 name=forward",
        "http_port 8089 accel defaultsite=cage-gateway name=gateway",
    ]
    assert _rules(_config()) == _rules(_config(front=False))  # the policy is the same either way


def _front_sections() -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    for line in (EGRESS_IMAGE_DIR / "haproxy.cfg").read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words and not line.startswith(" "):
            current = sections.setdefault(" ".join(words), [])
        elif words:
            current.append(" ".join(words))
    return sections


def _front_target(sections: dict[str, list[str]], body: list[str]) -> int:
    """The loopback port squid listens on that a frontend's backend hands its connections to."""
    backend = next(w for w in body if w.startswith("default_backend ")).split()[1]
    server = sections[f"backend {backend}"][0].split()
    assert server[-1] == "send-proxy"  # squid requires the header on these ports
    host, _, target = server[2].rpartition(":")
    assert host == "127.0.0.1"
    return int(target)


def test_the_image_front_hands_each_port_to_the_loopback_port_squid_listens_on() -> None:
    """`images/egress/haproxy.cfg`: each frontend's port, through its backend, to `FRONT_PORTS`;
    each abstract socket of boxes with no interface (`netns.SOCKETS`, the image labelled so) to the
    same port as its TCP twin, taking the PROXY header it is sent."""
    sections = _front_sections()
    pairs: dict[int, int] = {}
    sockets: dict[str, int] = {}
    assert f"{docker_egress.BOXES_LABEL}=abns" in (EGRESS_IMAGE_DIR / "Dockerfile").read_text()
    for head, body in sections.items():
        if not head.startswith("frontend "):
            continue
        bind = next(w for w in body if w.startswith("bind ")).split()
        if bind[1].startswith(":"):
            assert "accept-proxy" not in bind  # a box's own header would be believed
            pairs[int(bind[1].removeprefix(":"))] = _front_target(sections, body)
        else:
            assert bind[1].startswith("abns@") and "accept-proxy" in bind  # the proxy's namespace only
            sockets[bind[1].removeprefix("abns@")] = _front_target(sections, body)
    assert pairs == FRONT_PORTS
    assert sockets == {name: FRONT_PORTS[port] for port, name in netns.SOCKETS.items()}


def test_the_image_placeholders_listen_where_the_renders_do() -> None:
    """Until Cage's first render: `front.conf` behind the front (Docker), `squid.conf` alone
    (the Kubernetes chart)."""
    assert _ports((EGRESS_IMAGE_DIR / "front.conf").read_text()) == _ports(_config())
    assert _ports((EGRESS_IMAGE_DIR / "squid.conf").read_text()) == _ports(_config(front=False))


def test_render_gives_each_subnet_its_own_rules() -> None:
    lines = _config().splitlines()
    access = [line for line in lines if line.startswith("http_access")]
    assert access[-1] == "http_access deny all"
    never = access.index("http_access deny cage_never")
    assert all("gateway" in line for line in access[:never])  # only gateway rules come before it
    forward = [line for line in access[never:] if line.startswith("http_access allow forward")]
    assert len(forward) == 4  # three allowlist entries, one bridge rule, nothing for `none`
    assert any(line.endswith("!cage_blocked") for line in forward)
    assert any("dstdomain -n allowed.test" in line for line in lines)
    assert any("dstdom_regex -n -i \\.example\\.com$" in line for line in lines)
    assert any(line.endswith("dst 203.0.113.7/32") for line in lines)
    assert any(line.endswith("port 8080") for line in lines)
    never_acl = next(line for line in lines if line.startswith("acl cage_never"))
    assert "169.254.0.0/16" in never_acl and "10.213.0.0/16" in never_acl


def test_render_relays_the_gateway_only_for_boxes_that_have_one() -> None:
    lines = _config().splitlines()
    peers = [line for line in lines if line.startswith("cache_peer ")]
    assert peers == [
        "cache_peer host.docker.internal parent 4000 0 no-query no-digest originserver login=PASSTHRU "
        "name=gw_host_docker_internal_4000"
    ]
    relayed = [line for line in lines if line.startswith("http_access allow gateway")]
    assert len(relayed) == 2  # a-net and b-net; c-net has no gateway
    by_name = [line for line in lines if "allow forward !CONNECT cage_gateway_name" in line]
    assert len(by_name) == 2  # a proxied request for cage-gateway goes to the same relay
    assert "http_access deny gateway" in lines


def test_denied_lines_parse_and_others_do_not() -> None:
    assert parse_line("1796147422 10.213.0.19 TCP_DENIED 403 CONNECT evil.example 443") == (
        "10.213.0.19",
        "evil.example",
        443,
        "CONNECT",
    )
    assert parse_line("1796147422 10.213.0.19 TCP_MISS 200 GET ok.example 80") is None
    assert parse_line("2026/12/01 17:50:19| Accepting HTTP Socket connections") is None
    assert parse_line("") is None


async def test_denials_reach_the_subscriber_of_their_sandbox_only() -> None:
    hub = EgressDenials()
    hub.track("box-a", "10.213.0.16/28", "allow")
    hub.track("box-b", "10.213.0.32/28", "bridge")
    with hub.subscribe("box-a") as a, hub.subscribe("box-b") as b:

        def follow() -> None:  # the follower feeds from a thread of its own
            hub.feed("1 10.213.0.18 TCP_DENIED 403 GET x.example 80")
            hub.feed("1 10.213.0.99 TCP_DENIED 403 GET unknown.example 80")  # another process's box

        await anyio.to_thread.run_sync(follow)
        assert a.receive_nowait() == Denial(sandbox="box-a", host="x.example", port=80, method="GET")
        with pytest.raises(anyio.WouldBlock):
            b.receive_nowait()
    assert hub.counts == {"allow": 1}


async def test_settle_returns_once_the_log_shows_its_own_request_after_earlier_denials() -> None:
    """The poke stands in for the proxy: the line before it (a box's last refusal) and then the
    poke's own line reach the hub in the log's order, from the follower's thread."""
    pokes: list[tuple[str, int]] = []

    def poke(host: str, port: int) -> bool:
        pokes.append((host, port))

        def follow() -> None:
            hub.feed("1 10.213.0.18 TCP_DENIED 403 GET last.example 80")
            hub.feed(f"2 172.17.0.1 TCP_DENIED 403 GET {host} {port}")

        threading.Thread(target=follow).start()
        return True

    hub = EgressDenials(poke=poke)
    hub.track("box", "10.213.0.16/28", "bridge")
    with hub.subscribe("box") as denials, anyio.fail_after(30):
        await hub.settle(3600)  # returns on the poke's line, not after an hour
        assert denials.receive_nowait().host == "last.example"
        with pytest.raises(anyio.WouldBlock):  # the poke's own line is no denial of the box
            denials.receive_nowait()
    [(host, port)] = pokes
    assert host.startswith("127.") and 1024 <= port < 65536
    assert hub.counts == {"bridge": 1}
    # the same host and port asked for by a box later is a denial like any other
    assert hub.feed(f"3 10.213.0.18 TCP_DENIED 403 GET {host} {port}") == Denial("box", host, port, "GET")


async def test_settle_waits_its_time_when_the_proxy_cannot_be_poked() -> None:
    asked: list[str] = []

    def unreachable(host: str, port: int) -> bool:
        asked.append(host)
        return False

    for hub in (EgressDenials(), EgressDenials(poke=unreachable)):
        with anyio.fail_after(30):
            await hub.settle(0.01)
    assert len(asked) == 1


def test_a_box_this_process_did_not_attach_is_found_by_its_network() -> None:
    asked: list[str] = []

    def resolve(client: str) -> tuple[str, str, str] | None:
        asked.append(client)
        return ("adopted", "10.213.0.96/28", "none") if client.startswith("10.213.0.9") else None

    hub = EgressDenials(resolve=resolve)
    assert hub.feed("1 10.213.0.98 TCP_DENIED 403 GET x.example 80") == Denial(
        "adopted", "x.example", 80, "GET"
    )
    assert hub.feed("1 10.213.0.99 TCP_DENIED 403 GET y.example 80") is not None
    assert hub.feed("1 10.213.1.5 TCP_DENIED 403 GET z.example 80") is None
    assert asked == ["10.213.0.98", "10.213.1.5"]  # the second one was known by then
    assert hub.counts == {"none": 2}


def _request(tmp_path: Path, network: Any) -> SandboxRequest:
    spec = SandboxSpec.model_validate(
        {"version": "2.0", "runner": {"name": "claude"}, "computer": {"network": network}}
    )
    return SandboxRequest(owner="alice", assistant_id="tests.net", assistant_dir=tmp_path, spec=spec)


async def test_with_isolation_off_only_allowlists_are_isolated(tmp_path: Path) -> None:
    backend = FakeBackend()
    manager = SandboxManager(
        backend, FakeImageBuilder(), Settings(data_dir=tmp_path, isolated_networks=False)
    )
    manager.gateway_port = 4321
    listed = await manager.acquire(_request(tmp_path, {"allow": ["api.example.com", "*.github.com:443"]}))
    spec = backend.boxes[listed.ref.id].spec
    assert spec.egress is not None and spec.egress.key() == "allow:api.example.com,*.github.com:443"
    assert spec.gateway_relay == "host.docker.internal:4321"
    assert spec.extra_hosts == {}  # the host is reachable only when the allowlist names it
    assert spec.env["HTTPS_PROXY"] == spec.env["http_proxy"] == "http://cage-egress:3128"
    flat = await manager.acquire(_request(tmp_path / "flat", "bridge"))
    flat_spec = backend.boxes[flat.ref.id].spec
    assert flat_spec.egress is None and "HTTPS_PROXY" not in flat_spec.env


async def test_every_box_is_isolated_by_default(tmp_path: Path) -> None:
    backend = FakeBackend()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(data_dir=tmp_path))
    lease = await manager.acquire(_request(tmp_path, "bridge"))
    spec = backend.boxes[lease.ref.id].spec
    assert spec.egress == EgressPolicy(mode="bridge") and spec.gateway_relay is None


def test_denials_are_counted_in_the_server_metrics(tmp_path: Path) -> None:
    from prometheus_client import generate_latest

    from orchestrator.api.metrics import Metrics

    backend = FakeBackend()
    hub = EgressDenials()
    backend.egress = SimpleNamespace(denials=hub)  # type: ignore[attr-defined]  # what DockerBackend has
    metrics = Metrics()
    metrics.watch_sandboxes(SandboxManager(backend, FakeImageBuilder(), Settings(data_dir=tmp_path)))
    hub.track("box", "10.213.0.16/28", "bridge")
    hub.feed("1 10.213.0.18 TCP_DENIED 403 CONNECT x.example 443")
    text = generate_latest(metrics.registry).decode()
    assert 'cage_egress_denied_total{mode="bridge"} 1.0' in text
    assert 'cage_egress_denied_total{mode="allow"} 0.0' in text


async def test_a_box_whose_relay_points_at_another_gateway_is_recreated(tmp_path: Path) -> None:
    backend = FakeBackend()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(data_dir=tmp_path))
    spec = SandboxSpec.model_validate(
        {"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session"}
    )

    def request(port: int) -> SandboxRequest:
        return SandboxRequest(
            owner="alice",
            assistant_id="tests.net",
            assistant_dir=tmp_path,
            spec=spec,
            session_id="c1",
            gateway_port=port,
        )

    first = await manager.acquire(request(4000))
    await manager.release(first)
    same = await manager.acquire(request(4000))
    await manager.release(same)
    moved = await manager.acquire(request(4001))  # e.g. the server restarted on another port
    assert not same.created and same.ref.id == first.ref.id
    assert moved.created and moved.config_hash != first.config_hash
    assert backend.boxes[moved.ref.id].spec.gateway_relay == "host.docker.internal:4001"


class _SilentProxy:
    """The engine's API for a proxy that runs and never says it listens."""

    def inspect_container(self, name: str) -> dict[str, Any]:
        return {"State": {"Running": True, "Status": "running", "StartedAt": "2026-12-05T22:17:14.672Z"}}

    def logs(self, name: str, *, stdout: bool, stderr: bool, **_: Any) -> bytes:
        said = b"2026-12-05T22:17:15.000Z 2026/12/05 22:17:15| FATAL: squid could not open a port\n"
        requests = b"2026-12-05T22:17:16.000Z 1796 10.213.0.18 TCP_DENIED 403 GET other.example 80\n"
        return (said if stderr else b"") + (requests if stdout else b"")


def test_a_proxy_that_never_listens_fails_the_box_and_leaves_squids_own_words_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docker_proxy, "PROXY_START_SECONDS", 0.05)
    api = _SilentProxy()
    proxy = docker_proxy.EgressProxy(lambda: api, Settings(data_dir=tmp_path))
    with capture_logs() as logs, pytest.raises(SandboxError, match="did not listen within"):
        proxy.await_listening("cage-egress")
    [silent] = [entry for entry in logs if entry["event"] == "egress.proxy.silent"]
    assert "FATAL: squid could not open a port" in silent["last"]
    assert "other.example" not in silent["last"]  # squid's stderr only, never boxes' requests
