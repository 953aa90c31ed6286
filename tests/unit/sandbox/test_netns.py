"""The pure parts of serving boxes with no interface (`orchestrator.sandbox.docker.netns`)."""

from __future__ import annotations

import ipaddress

import pytest

from orchestrator.sandbox.docker.netns import BOX_PREFIX, abstract_address, box_address, proxy_header
from orchestrator.sandbox.egress.squid import EgressClient, render
from orchestrator.sandbox.network import EgressPolicy

ID_A = "3f1c" + "0" * 56
ID_B = "3f1d" + "0" * 56


def test_a_box_address_comes_from_its_id_alone_and_lies_in_the_box_range() -> None:
    assert box_address(ID_A) == box_address(ID_A)
    assert box_address(ID_A) != box_address(ID_B)
    assert box_address(ID_A) in BOX_PREFIX
    assert BOX_PREFIX.subnet_of(ipaddress.ip_network("fd00::/8"))  # unique local: never routed


def test_a_short_id_has_no_address() -> None:
    with pytest.raises(ValueError, match="full container id"):
        box_address("3f1c")


def test_the_header_names_the_box_as_the_client_of_the_port() -> None:
    header = proxy_header(box_address(ID_A), 40000, 3128)
    assert header == f"PROXY TCP6 {box_address(ID_A)} ::1 40000 3128\r\n".encode()
    assert header.endswith(b"\r\n") and header.count(b"\r\n") == 1


def test_squid_gives_a_box_its_own_rules_and_never_takes_the_range_for_a_destination() -> None:
    box = EgressClient(
        name="cage-a", sources=(f"{box_address(ID_A)}/128",), policy=EgressPolicy(mode="bridge")
    )
    text = render([box], never=("10.213.0.0/16", str(BOX_PREFIX)), front=True)
    assert f"src {box_address(ID_A)}\n" in text  # bare: squid matches no IPv6 /128
    never = next(line for line in text.splitlines() if line.startswith("acl cage_never dst"))
    assert str(BOX_PREFIX) in never.split()


def test_the_front_s_abstract_address_is_haproxy_s_padded_form() -> None:
    address = abstract_address("cage-forward")
    assert (
        len(address) == 108
        and address.startswith(b"\0cage-forward\0")
        and address.strip(b"\0") == b"cage-forward"
    )
