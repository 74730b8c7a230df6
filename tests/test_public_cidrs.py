"""A created cluster's public API endpoint: the union of ``cluster.publicAccessCidrs`` is what is open, however the
list splits it (modelfleet/deploy/checks.py). Generated splits of the whole address space, and of most of its
public part, are refused; small egress lists pass."""

from __future__ import annotations

import ipaddress

from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.deploy.checks import CIDRS_PATH, MAX_PUBLIC, _cidr_issues, public_addresses

WHOLE = {4: ipaddress.ip_network("0.0.0.0/0"), 6: ipaddress.ip_network("::/0")}


@st.composite
def partitions(draw, version: int, depth: int = 12):
    """A random partition of the whole IPv{version} space into CIDR blocks, none of them /0, in any order,
    written in any of the spellings ipaddress accepts (compressed, exploded)."""
    pending, blocks = [WHOLE[version]], []
    while pending:
        network = pending.pop()
        if network.prefixlen == 0 or (network.prefixlen < depth and draw(st.booleans())):
            pending.extend(network.subnets())
        else:
            blocks.append(network)
    blocks = draw(st.permutations(blocks))
    return [b.exploded if draw(st.booleans()) else str(b) for b in blocks]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), version=st.sampled_from([4, 6]))
def test_a_list_whose_union_is_everything_is_refused(data, version):
    cidrs = data.draw(partitions(version))
    extra = data.draw(st.lists(st.sampled_from(["203.0.113.0/24", "2001:db8::/32", "10.0.0.0/8"]), max_size=2))
    issues = _cidr_issues(tuple(cidrs + extra), "Pulumi.prod.yaml")
    assert any(i.path == CIDRS_PATH and f"IPv{version} blocks together cover" in str(i) for i in issues), cidrs
    assert all(str(i).startswith("Pulumi.prod.yaml:") and i.fix for i in issues)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=40), st.integers(9, 32))
def test_the_public_internet_minus_a_hole_is_refused(holes, prefix):
    """All of IPv4's public space but a few blocks (the addresses one attacker cannot reach anyway)."""
    space = {ipaddress.ip_network("0.0.0.0/0")}
    for hole in {ipaddress.ip_network((h, prefix), strict=False) for h in holes}:
        space = {part for block in space for part in
                 ([block] if not block.overlaps(hole) else
                  ([] if block.subnet_of(hole) else list(block.address_exclude(hole))))}
    issues = _cidr_issues(tuple(sorted(map(str, space))), "Pulumi.prod.yaml")
    assert [i.path for i in issues] == [CIDRS_PATH]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(16, 32)), max_size=60),
       st.lists(st.tuples(st.integers(0, 2**128 - 1), st.integers(48, 128)), max_size=20))
def test_egress_lists_pass(v4, v6):
    cidrs = [str(ipaddress.ip_network(a, strict=False)) for a in [*v4, *v6]]
    assert _cidr_issues(tuple(cidrs), "Pulumi.prod.yaml") == []


def test_private_and_documentation_space_does_not_count():
    """10/8 and 172.16/12 hold no client on the internet: listing them opens nothing."""
    assert public_addresses([ipaddress.ip_network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]) \
        == {4: 0, 6: 0}
    assert _cidr_issues(("10.0.0.0/8", "172.16.0.0/12", "fd00::/8"), "f") == []


def test_the_limits_are_exact():
    """A /8 of public IPv4 passes, a /7 does not; a /32 of IPv6 passes, a /31 does not."""
    assert MAX_PUBLIC == {4: (8, 2**24), 6: (32, 2**96)}
    assert _cidr_issues(("11.0.0.0/8",), "f") == []
    assert [i.path for i in _cidr_issues(("12.0.0.0/7",), "f")] == [CIDRS_PATH]
    assert [i.path for i in _cidr_issues(("11.0.0.0/8", "12.0.0.0/24"), "f")] == [CIDRS_PATH]
    assert _cidr_issues(("2600::/32",), "f") == []
    assert [i.path for i in _cidr_issues(("2600::/31",), "f")] == [CIDRS_PATH]


def test_the_message_names_the_widest_blocks():
    (issue,) = _cidr_issues(("0.0.0.0/1", "128.0.0.0/1", "203.0.113.0/24"), "Pulumi.prod.yaml")
    assert str(issue).startswith(f"Pulumi.prod.yaml: {CIDRS_PATH}: the listed IPv4 blocks together cover 3,702,258,688 ")
    assert "(widest: 0.0.0.0/1, 128.0.0.0/1, 203.0.113.0/24)" in str(issue) and "private endpoint" in issue.fix
