"""The address guard of HTTP steps (server-side request forgery): which addresses a call may
connect to. The host is resolved once, every address it resolves to is checked, and the call
connects to a checked address (``client``), so a name cannot resolve to an allowed address when
checked and to a forbidden one when connected (no DNS-rebinding gap).

Always refused: link-local (169.254.0.0/16, fe80::/10), the instance-metadata addresses
(169.254.169.254, fd00:ec2::254), and addresses that are not unicast (multicast, reserved).
Refused on AWS too (``private_allowed`` false): loopback, the unspecified address and private
ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7). Locally, loopback and private ranges
are allowed so examples work. An allow list (``BATON_HTTP_ALLOW``: CIDRs, addresses and host
names, comma-separated) lets through what it names.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
NAT64 = ipaddress.ip_network("64:ff9b::/96")
PRIVATE = (
    ipaddress.ip_network("10.0.0.0/8"),
    ipaddress.ip_network("172.16.0.0/12"),
    ipaddress.ip_network("192.168.0.0/16"),
    ipaddress.ip_network("100.64.0.0/10"),
    ipaddress.ip_network("fc00::/7"),
)

_HOST_NAME = re.compile(
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)


class Refused(Exception):
    """A call the guard will not make; the message is the step's reason."""


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """What the guard lets through: ``private_allowed`` (loopback and private ranges: locally
    yes, on AWS no) and an allow list of networks and host names."""

    private_allowed: bool = True
    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, allow: Iterable[str], *, private_allowed: bool) -> AddressPolicy:
        """From allow-list entries (CIDRs, addresses, host names); ValueError names a bad one."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for raw in allow:
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if not _HOST_NAME.match(entry.lower().rstrip(".")):
                raise ValueError(f"{entry!r} is neither a CIDR, an address nor a host name")
            hosts.add(entry.lower().rstrip("."))
        return cls(private_allowed, tuple(networks), frozenset(hosts))

    def host_allowed(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.hosts

    def check(self, address: IPAddress) -> None:
        """Raise :class:`Refused` for an address the policy does not let through."""
        address = _embedded_ipv4(address)
        if any(address in n for n in self.networks):
            return
        if address in METADATA:
            raise Refused(f"{address} is an instance-metadata address")
        if any(address in n for n in LINK_LOCAL):
            raise Refused(f"{address} is a link-local address")
        special = address.is_loopback or address.is_unspecified
        if address.is_multicast or (address.is_reserved and not special):
            raise Refused(f"{address} is not a unicast address")
        if self.private_allowed:
            return
        if address.is_loopback:
            raise Refused(f"{address} is a loopback address")
        if address.is_unspecified:
            raise Refused(f"{address} is the unspecified address")
        if any(address in n for n in PRIVATE):
            raise Refused(f"{address} is a private address")


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) address
    reaches; any other address itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an address literal: itself), in resolver order."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise OSError(f"cannot resolve {host}: {e.strerror or e}") from e
    out: list[IPAddress] = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # an IPv6 scope id is not part of the address
        address = ipaddress.ip_address(text)
        if address not in out:
            out.append(address)
    return out


def checked_addresses(policy: AddressPolicy, host: str, port: int) -> list[IPAddress]:
    """The addresses a call to ``host`` may connect to: all it resolves to, each checked (one
    forbidden address refuses the call: a name pointing at both is not to be trusted)."""
    addresses = resolve(host, port)
    if policy.host_allowed(host):
        return addresses
    for address in addresses:
        try:
            policy.check(address)
        except Refused as e:
            named = "" if str(address) == host.strip("[]") else f"{host} resolves to "
            raise Refused(f"refused: {named}{e}") from None
    return addresses
