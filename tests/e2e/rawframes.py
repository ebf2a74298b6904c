"""Ethernet / 802.1Q / IPv4 / UDP frames built by hand, for the requests no
socket would send (forged sources, VLAN tags, wrong checksums), and the
parsing of the replies that come back.  Standard library only."""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass


def mac(text: str) -> bytes:
    return bytes(int(b, 16) for b in text.split(":"))


def ip(text: str) -> bytes:
    return ipaddress.IPv4Address(text).packed


def ones_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def checksum(data: bytes) -> int:
    return ~ones_sum(data) & 0xFFFF


@dataclass
class Frame:
    """A UDP datagram in an Ethernet frame.  udp_checksum: "good" (computed),
    "none" (0) or "bad" (computed, then one bit flipped)."""
    dst_mac: str
    src_mac: str
    src_ip: str
    dst_ip: str
    src_port: int
    dst_port: int
    payload: bytes
    vlan: int | None = None
    udp_checksum: str = "good"
    frag: int = 0x4000          # DF

    def build(self) -> bytes:
        udp_len = 8 + len(self.payload)
        src, dst = ip(self.src_ip), ip(self.dst_ip)
        udp = struct.pack(">HHHH", self.src_port, self.dst_port, udp_len, 0) + self.payload
        if self.udp_checksum != "none":
            c = checksum(src + dst + struct.pack(">BBH", 0, 17, udp_len) + udp) or 0xFFFF
            if self.udp_checksum == "bad":
                c ^= 0x0100
            udp = udp[:6] + struct.pack(">H", c) + udp[8:]
        iph = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, self.frag, 64, 17, 0, src, dst)
        iph = iph[:10] + struct.pack(">H", checksum(iph)) + iph[12:]
        eth = mac(self.dst_mac) + mac(self.src_mac)
        if self.vlan is not None:
            eth += struct.pack(">HH", 0x8100, self.vlan)
        return eth + struct.pack(">H", 0x0800) + iph + udp


@dataclass
class Parsed:
    dst_mac: str
    src_mac: str
    vlan: int | None
    src_ip: str
    dst_ip: str
    src_port: int
    dst_port: int
    payload: bytes


def _mac_text(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def parse(frame: bytes) -> Parsed | None:
    """A UDP/IPv4 frame's parts; None for anything else (ARP, IPv6, ...)."""
    off, vlan = 12, None
    (etype,) = struct.unpack_from(">H", frame, off)
    if etype == 0x8100:
        vlan = struct.unpack_from(">H", frame, 14)[0] & 0xFFF
        off = 16
        (etype,) = struct.unpack_from(">H", frame, off)
    if etype != 0x0800 or len(frame) < off + 2 + 28:
        return None
    l3 = off + 2
    ihl = (frame[l3] & 0xF) * 4
    if frame[l3 + 9] != 17:
        return None
    src, dst = frame[l3 + 12:l3 + 16], frame[l3 + 16:l3 + 20]
    sport, dport, ulen = struct.unpack_from(">HHH", frame, l3 + ihl)
    payload = frame[l3 + ihl + 8:l3 + ihl + ulen]
    return Parsed(_mac_text(frame[0:6]), _mac_text(frame[6:12]), vlan,
                  str(ipaddress.IPv4Address(src)), str(ipaddress.IPv4Address(dst)),
                  sport, dport, payload)
