//! What a capture held besides the TCP that was analysed: the frames skipped and why, and
//! the tunnels TCP was unwrapped from.
//!
//! People run `analyze` on whatever they captured. When the answer is "no TCP here", or
//! fewer segments than they expected, the census says what was there instead (UDP, ICMP,
//! ARP, IP fragments, a tunnel holding something else, frames cut by the snap length), and
//! when TCP came out of VXLAN or GRE it says so, so nobody wonders where the outer headers
//! went.

use serde::Serialize;

use crate::units::fmt_count;
use crate::wire::{Decoded, NotTcp, Tunnel, WlanSkip};

use super::CaptureSummary;

/// Frames that were not analysed, and why. `not_tcp` is the sum of the kinds after it up to
/// `in_tunnels`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub not_tcp: u64,
    pub udp: u64,
    /// ICMP and ICMPv6.
    pub icmp: u64,
    /// IP carrying something else: IGMP, ESP, OSPF, SCTP, …
    pub other_ip: u64,
    /// Non-first IP fragments: their transport header is in another packet.
    pub ip_fragments: u64,
    /// No IP at all: ARP, LLDP, spanning tree, …
    pub not_ip: u64,
    /// Headers that contradict each other (an IP or TCP header length that cannot be).
    pub malformed: u64,
    /// Tunnel packets (VXLAN, GRE, MPLS, …) whose inner packet is not TCP.
    pub in_tunnels: u64,
    /// Too few bytes captured to reach the TCP header (a snap length shorter than the
    /// headers).
    pub truncated: u64,
    /// Frames on interfaces whose link type tcpdoctor does not decode.
    pub unsupported_link: u64,
    /// 802.11 data frames with the Protected bit: encrypted, not decoded.
    pub wlan_encrypted: u64,
    /// 802.11 management, control and extension frames, and data frames without payload.
    pub wlan_no_data: u64,
    /// 802.11 A-MSDUs not split: one found inside another's subframe (through a tunnel).
    pub wlan_aggregated: u64,
    /// 802.11 A-MSDUs with a subframe whose length runs past the frame: that subframe and
    /// those after it not decoded (the whole ones before it were).
    pub wlan_bad_subframes: u64,
}

impl Skipped {
    /// Every frame not analysed: those not TCP and those that could not be read.
    pub fn total(&self) -> u64 {
        self.not_tcp
            + self.truncated
            + self.unsupported_link
            + self.wlan_encrypted
            + self.wlan_no_data
            + self.wlan_aggregated
            + self.wlan_bad_subframes
    }
}

/// The 802.11 A-MSDUs of a capture, split into their subframes: each subframe's packet is
/// decoded (and counted: TCP segments, or in `skipped`) like a frame's, citing the frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AmsduSplit {
    /// Frames that were an A-MSDU.
    pub frames: u64,
    /// The subframes decoded from them (a subframe cut short is not one of them).
    pub subframes: u64,
}

/// One kind of tunnel in a capture.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TunnelCount {
    /// `GRE`, `ERSPAN`, `VXLAN`, `Geneve`, `MPLS`, `PPPoE` or `IP-in-IP`.
    pub tunnel: String,
    /// TCP segments analysed from inside it (a segment in nested tunnels counts for the
    /// outermost).
    pub tcp_segments: u64,
    /// Its packets that held no TCP (also counted in `skipped.in_tunnels`).
    pub not_tcp: u64,
}

/// Counts what each frame was, as [`decode_tcp`](crate::wire::decode_tcp) found it.
#[derive(Clone, Debug, Default)]
pub struct Census {
    skipped: Skipped,
    /// Per [`Tunnel::ALL`]: TCP segments, other packets.
    tunnels: [[u64; 2]; Tunnel::ALL.len()],
    amsdu: AmsduSplit,
}

impl Census {
    /// Counts one decoded frame.
    #[inline]
    pub fn count(&mut self, decoded: &Decoded) {
        match *decoded {
            Decoded::Tcp(_, via) => self.tunnelled(via),
            _ => self.not_analysed(decoded),
        }
    }

    /// Counts a TCP segment found inside `via` (nothing for one outside any tunnel).
    #[inline]
    pub fn tunnelled(&mut self, via: Option<Tunnel>) {
        if let Some(t) = via {
            self.tunnels[t as usize][0] += 1;
        }
    }

    /// Counts an 802.11 A-MSDU frame and its `whole` subframes (each of their packets is
    /// counted as a frame's would be).
    pub fn amsdu(&mut self, whole: u64) {
        self.amsdu.frames += 1;
        self.amsdu.subframes += whole;
    }

    /// Counts a frame without a TCP segment (nothing for a TCP segment).
    pub fn not_analysed(&mut self, decoded: &Decoded) {
        let s = &mut self.skipped;
        let what = match *decoded {
            Decoded::Tcp(..) => return,
            Decoded::Truncated => return s.truncated += 1,
            Decoded::UnsupportedLink => return s.unsupported_link += 1,
            Decoded::Wlan(WlanSkip::Encrypted) => return s.wlan_encrypted += 1,
            Decoded::Wlan(WlanSkip::NoData) => return s.wlan_no_data += 1,
            Decoded::Wlan(WlanSkip::Aggregated) => return s.wlan_aggregated += 1,
            Decoded::Wlan(WlanSkip::BadSubframe) => return s.wlan_bad_subframes += 1,
            Decoded::NotTcp(what) => what,
        };
        s.not_tcp += 1;
        match what {
            NotTcp::Udp => s.udp += 1,
            NotTcp::Icmp => s.icmp += 1,
            NotTcp::OtherIp => s.other_ip += 1,
            NotTcp::Fragment => s.ip_fragments += 1,
            NotTcp::NotIp => s.not_ip += 1,
            NotTcp::Malformed => s.malformed += 1,
            NotTcp::InTunnel(t) => {
                s.in_tunnels += 1;
                self.tunnels[t as usize][1] += 1;
            }
        }
    }

    /// The skipped frames, the tunnels seen and the A-MSDUs split (`None` without any).
    pub fn finish(&self) -> (Skipped, Vec<TunnelCount>, Option<AmsduSplit>) {
        let tunnels = Tunnel::ALL
            .iter()
            .zip(self.tunnels)
            .filter(|(_, [tcp, other])| tcp + other > 0)
            .map(|(t, [tcp, other])| TunnelCount {
                tunnel: t.name().to_string(),
                tcp_segments: tcp,
                not_tcp: other,
            })
            .collect();
        let amsdu = (self.amsdu.frames > 0).then_some(self.amsdu);
        (self.skipped, tunnels, amsdu)
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", fmt_count(n), if n == 1 { one } else { many })
}

impl CaptureSummary {
    /// The frames skipped, by kind, largest kinds first as people look for them:
    /// `1,180 UDP, 20 ICMP, 4 other IP, 3 VXLAN packets without TCP inside`. Empty when
    /// nothing was skipped.
    pub fn skipped_kinds(&self) -> String {
        let s = &self.skipped;
        let mut parts: Vec<String> = [
            (s.udp, "UDP", "UDP"),
            (s.icmp, "ICMP", "ICMP"),
            (s.other_ip, "other IP", "other IP"),
            (s.ip_fragments, "IP fragment", "IP fragments"),
            (s.not_ip, "not IP", "not IP"),
            (
                s.malformed,
                "with contradictory headers",
                "with contradictory headers",
            ),
        ]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, one, many)| plural(n, one, many))
        .collect();
        for t in self.tunnels.iter().filter(|t| t.not_tcp > 0) {
            let kind = format!("{} packet", t.tunnel);
            let kinds = format!("{} packets", t.tunnel);
            parts.push(format!(
                "{} without TCP inside",
                plural(t.not_tcp, &kind, &kinds)
            ));
        }
        if s.truncated > 0 {
            parts.push(format!(
                "{} too short for the headers (snap length)",
                fmt_count(s.truncated)
            ));
        }
        if s.unsupported_link > 0 {
            parts.push(format!(
                "{} on link types not decoded",
                fmt_count(s.unsupported_link)
            ));
        }
        if s.wlan_encrypted > 0 {
            parts.push(format!(
                "{} encrypted (802.11 protected, not decoded)",
                fmt_count(s.wlan_encrypted)
            ));
        }
        if s.wlan_aggregated > 0 {
            parts.push(format!(
                "{} 802.11 A-MSDU inside another (not split)",
                fmt_count(s.wlan_aggregated)
            ));
        }
        if s.wlan_bad_subframes > 0 {
            parts.push(format!(
                "{} 802.11 A-MSDU with a subframe length past the frame's end (the rest not \
                 decoded)",
                fmt_count(s.wlan_bad_subframes)
            ));
        }
        if s.wlan_no_data > 0 {
            parts.push(format!(
                "{} 802.11 management, control or null",
                fmt_count(s.wlan_no_data)
            ));
        }
        parts.join(", ")
    }

    /// `802.11 A-MSDU: 3 frames split into 7 subframes, each analysed as a packet of its
    /// frame`, or `None` without A-MSDUs.
    pub fn amsdu_line(&self) -> Option<String> {
        let a = self.amsdu?;
        Some(format!(
            "802.11 A-MSDU: {} split into {}, each analysed as a packet of its frame",
            plural(a.frames, "frame", "frames"),
            plural(a.subframes, "subframe", "subframes")
        ))
    }

    /// `312 TCP segments decapsulated from VXLAN, 20 from GRE` (most first), or `None`
    /// without tunnelled TCP.
    pub fn decapsulated(&self) -> Option<String> {
        let mut found: Vec<&TunnelCount> =
            self.tunnels.iter().filter(|t| t.tcp_segments > 0).collect();
        found.sort_by_key(|t| std::cmp::Reverse(t.tcp_segments));
        let parts: Vec<String> = found
            .into_iter()
            .enumerate()
            .map(|(i, t)| match i {
                0 => format!(
                    "{} decapsulated from {}",
                    plural(t.tcp_segments, "TCP segment", "TCP segments"),
                    t.tunnel
                ),
                _ => format!("{} from {}", fmt_count(t.tcp_segments), t.tunnel),
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// Why a capture gave nothing to analyse, counting what it held instead.
    pub fn no_tcp_message(&self) -> String {
        let mut msg = format!(
            "no TCP packets in this capture: {}",
            plural(self.frames, "frame", "frames")
        );
        let kinds = self.skipped_kinds();
        if !kinds.is_empty() {
            msg.push_str(" — ");
            msg.push_str(&kinds);
        }
        if !self.link_types.is_empty() {
            let s = if self.link_types.len() == 1 { "" } else { "s" };
            msg.push_str(&format!("; link type{s} {}", self.link_types.join(", ")));
        }
        msg.push_str("; capture with a filter such as 'tcp port 8080'");
        msg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{LinkType, Tunnel};

    fn summary(census: &Census, frames: u64, links: &[LinkType]) -> CaptureSummary {
        let (skipped, tunnels, amsdu) = census.finish();
        CaptureSummary {
            file: "f.pcap".into(),
            format: "pcap".into(),
            link_types: links.iter().map(|l| l.to_string()).collect(),
            frames,
            tcp_segments: 0,
            skipped,
            tunnels,
            amsdu,
            flows: 0,
            exchanges: 0,
            duration_ms: 0.0,
            time_steps_back: None,
            half_open_untracked: 0,
            servers: Vec::new(),
            servers_omitted: 0,
            truncated: None,
            audit: None,
            withdrawn: Vec::new(),
        }
    }

    #[test]
    fn every_kind_is_counted_and_said() {
        let mut c = Census::default();
        let mut n = 0;
        let mut add = |d: Decoded, times: u64| {
            for _ in 0..times {
                c.count(&d);
                n += 1;
            }
        };
        add(Decoded::NotTcp(NotTcp::Udp), 1180);
        add(Decoded::NotTcp(NotTcp::Icmp), 20);
        add(Decoded::NotTcp(NotTcp::OtherIp), 4);
        add(Decoded::NotTcp(NotTcp::Fragment), 1);
        add(Decoded::NotTcp(NotTcp::NotIp), 2);
        add(Decoded::NotTcp(NotTcp::Malformed), 1);
        add(Decoded::NotTcp(NotTcp::InTunnel(Tunnel::Vxlan)), 3);
        add(Decoded::NotTcp(NotTcp::InTunnel(Tunnel::Gre)), 1);
        add(Decoded::Truncated, 5);
        add(Decoded::UnsupportedLink, 7);
        add(Decoded::Wlan(WlanSkip::Encrypted), 9);
        add(Decoded::Wlan(WlanSkip::Aggregated), 1);
        add(Decoded::Wlan(WlanSkip::BadSubframe), 2);
        add(Decoded::Wlan(WlanSkip::NoData), 30);
        let s = summary(&c, n, &[LinkType::Radiotap, LinkType::Other(201)]);
        assert_eq!(s.skipped.not_tcp, 1180 + 20 + 4 + 1 + 2 + 1 + 4);
        assert_eq!((s.skipped.in_tunnels, s.skipped.truncated), (4, 5));
        let w = &s.skipped;
        assert_eq!(
            (
                w.wlan_encrypted,
                w.wlan_aggregated,
                w.wlan_bad_subframes,
                w.wlan_no_data
            ),
            (9, 1, 2, 30)
        );
        assert_eq!(w.total(), n);
        assert_eq!(
            s.no_tcp_message(),
            "no TCP packets in this capture: 1,266 frames — 1,180 UDP, 20 ICMP, 4 other IP, \
             1 IP fragment, 2 not IP, 1 with contradictory headers, 1 GRE packet without TCP \
             inside, 3 VXLAN packets without TCP inside, 5 too short for the headers (snap \
             length), 7 on link types not decoded, 9 encrypted (802.11 protected, not decoded), \
             1 802.11 A-MSDU inside another (not split), 2 802.11 A-MSDU with a subframe length \
             past the frame's end (the rest not decoded), 30 802.11 management, control or null; \
             link types 802.11 radiotap, Bluetooth HCI H4 (201, not decoded); capture with a \
             filter such as 'tcp port 8080'"
        );
        assert_eq!(s.decapsulated(), None);
        assert_eq!(s.amsdu_line(), None);
        let empty = summary(&Census::default(), 0, &[]);
        assert_eq!(
            empty.no_tcp_message(),
            "no TCP packets in this capture: 0 frames; capture with a filter such as 'tcp port \
             8080'"
        );
        assert_eq!(empty.skipped_kinds(), "");
    }

    #[test]
    fn tunnels_are_listed_in_a_fixed_order_with_what_came_out_of_them() {
        let seg = crate::wire::TcpSegment {
            src: crate::wire::Endpoint {
                ip: [10, 0, 0, 1].into(),
                port: 1,
            },
            dst: crate::wire::Endpoint {
                ip: [10, 0, 0, 2].into(),
                port: 2,
            },
            seq: 0,
            ack: 0,
            flags: crate::wire::TcpFlags(0),
            window: 0,
            payload_len: 0,
            options: Default::default(),
        };
        let mut c = Census::default();
        for _ in 0..312 {
            c.count(&Decoded::Tcp(seg, Some(Tunnel::Vxlan)));
        }
        c.count(&Decoded::Tcp(seg, Some(Tunnel::Gre)));
        c.count(&Decoded::Tcp(seg, None));
        c.count(&Decoded::NotTcp(NotTcp::InTunnel(Tunnel::Vxlan)));
        let s = summary(&c, 315, &[LinkType::Ethernet]);
        assert_eq!(
            s.decapsulated().as_deref(),
            Some("312 TCP segments decapsulated from VXLAN, 1 from GRE")
        );
        let names: Vec<(&str, u64, u64)> = s
            .tunnels
            .iter()
            .map(|t| (t.tunnel.as_str(), t.tcp_segments, t.not_tcp))
            .collect();
        assert_eq!(names, [("GRE", 1, 0), ("VXLAN", 312, 1)]);
        assert_eq!(s.skipped.not_tcp, 1);
    }

    #[test]
    fn amsdus_split_are_counted_and_said() {
        let mut c = Census::default();
        c.amsdu(2);
        c.amsdu(1);
        let s = summary(&c, 2, &[LinkType::Radiotap]);
        assert_eq!(
            s.amsdu,
            Some(AmsduSplit {
                frames: 2,
                subframes: 3
            })
        );
        assert_eq!(
            s.amsdu_line().as_deref(),
            Some("802.11 A-MSDU: 2 frames split into 3 subframes, each analysed as a packet of its frame")
        );
        let mut one = Census::default();
        one.amsdu(1);
        assert_eq!(
            summary(&one, 1, &[]).amsdu_line().as_deref(),
            Some("802.11 A-MSDU: 1 frame split into 1 subframe, each analysed as a packet of its frame")
        );
    }
}
