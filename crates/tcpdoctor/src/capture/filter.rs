//! The classic BPF program attached to the capture socket: which packets the kernel copies
//! into the ring, and how many bytes of each.
//!
//! Filtering in the kernel is what keeps drops and CPU down under load: a packet the filter
//! rejects is never copied, and the filter's return value is the snap length, so an accepted
//! packet costs only that many bytes of ring. Rules:
//! 1. On loopback every packet passes the tap twice (sent, then received); only the received
//!    copy is kept, as tcpdump does — on a capture of all interfaces too, where the filter
//!    drops outgoing packets of the loopback interface only ([`SkipOutgoing`]).
//! 2. Without ports, every packet is accepted (cut to the snap length).
//! 3. With ports: IPv4 or IPv6 (the protocol from the kernel's metadata, so the same program
//!    serves Ethernet, raw-IP links and cooked sockets), TCP, and the source or destination
//!    port in the set. IPv4 fragments after the first carry no TCP header and are rejected.
//! 4. IPv6: up to [`IPV6_EXTENSION_HOPS`] extension headers before TCP are stepped over —
//!    hop-by-hop options, routing, destination options, and a fragment header when it is the
//!    first fragment (later ones carry no TCP header). Anything else before TCP (AH, ESP, a
//!    longer chain) is rejected.

use anyhow::bail;

pub const MAX_PORTS: usize = 32;

const LD_W_ABS: u16 = 0x20;
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_H_IND: u16 = 0x48;
const LD_B_IND: u16 = 0x50;
const LD_MEM: u16 = 0x60;
const LDX_IMM: u16 = 0x01;
const ST: u16 = 0x02;
const ADD_K: u16 = 0x04;
const ADD_X: u16 = 0x0c;
const LSH_K: u16 = 0x64;
const TAX: u16 = 0x07;
const TXA: u16 = 0x87;
const LDX_B_MSH: u16 = 0xb1;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

const AD_OFF: u32 = 0xffff_f000; // SKF_AD_OFF (-0x1000)
const AD_PROTOCOL: u32 = AD_OFF; // + SKF_AD_PROTOCOL (0)
const AD_PKTTYPE: u32 = AD_OFF + 4;
const AD_IFINDEX: u32 = AD_OFF + 8;
const PACKET_OUTGOING: u32 = 4;
const ETH_P_IP: u32 = 0x0800;
const ETH_P_IPV6: u32 = 0x86dd;
const IPPROTO_TCP: u32 = 6;
const IPPROTO_HOPOPTS: u32 = 0;
const IPPROTO_ROUTING: u32 = 43;
const IPPROTO_FRAGMENT: u32 = 44;
const IPPROTO_DSTOPTS: u32 = 60;

/// How many IPv6 extension headers the filter steps over before giving up on a packet.
pub const IPV6_EXTENSION_HOPS: u8 = 4;

/// One instruction: `struct sock_filter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// Where a conditional jump goes: the next instruction or a label.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    L(Label),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Direction,
    V6,
    Hop(u8),
    Extension(u8),
    Fragment(u8),
    Tcp,
    Accept,
    Reject,
}

struct Asm {
    code: Vec<(u16, To, To, u32)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn op(&mut self, code: u16, k: u32) {
        self.code.push((code, To::Next, To::Next, k));
    }
    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) {
        self.code.push((code, jt, jf, k));
    }
    /// An unconditional jump (`ja`) to `l`.
    fn goto(&mut self, l: Label) {
        self.code.push((JA, To::L(l), To::Next, 0));
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.code.len()));
    }
    /// `jeq #port` to Accept for each port; falls through when none matches.
    fn any_port(&mut self, ports: &[u16]) {
        for &p in ports {
            self.jump(JEQ_K, u32::from(p), To::L(Label::Accept), To::Next);
        }
    }
    fn finish(self) -> anyhow::Result<Vec<Insn>> {
        let at = |l: Label| {
            self.labels
                .iter()
                .find(|(x, _)| *x == l)
                .map(|(_, i)| *i)
                .expect("every label used is placed")
        };
        let mut out = Vec::with_capacity(self.code.len());
        for (i, &(code, jt, jf, k)) in self.code.iter().enumerate() {
            let rel = |t: To| -> anyhow::Result<u8> {
                match t {
                    To::Next => Ok(0),
                    To::L(l) => match u8::try_from(at(l) - (i + 1)) {
                        Ok(d) => Ok(d),
                        Err(_) => bail!("too many ports for one filter"),
                    },
                }
            };
            if code == JA {
                let To::L(l) = jt else {
                    unreachable!("goto always names a label")
                };
                let k = (at(l) - (i + 1)) as u32;
                out.push(Insn {
                    code,
                    jt: 0,
                    jf: 0,
                    k,
                });
                continue;
            }
            let (jt, jf) = (rel(jt)?, rel(jf)?);
            out.push(Insn { code, jt, jf, k });
        }
        Ok(out)
    }
}

/// Which copies of a packet leaving through loopback the filter drops: every packet sent on
/// loopback comes back in, so the outgoing copy is a duplicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipOutgoing {
    /// Keep every packet (a link that is not loopback).
    Never,
    /// Drop every outgoing packet (the capture is on loopback only).
    Always,
    /// Drop outgoing packets on the interface with this index (loopback, in a capture on all
    /// interfaces).
    OnInterface(u32),
}

/// Keeps outgoing packets only (what a device's own stack sends), cut to `snaplen` bytes.
pub fn outgoing_only(snaplen: u32) -> Vec<Insn> {
    let insn = |code, jt, jf, k| Insn { code, jt, jf, k };
    vec![
        insn(LD_W_ABS, 0, 0, AD_PKTTYPE),
        insn(JEQ_K, 0, 1, PACKET_OUTGOING),
        insn(RET_K, 0, 0, snaplen),
        insn(RET_K, 0, 0, 0),
    ]
}

/// The filter for a link whose IP header starts `l3` bytes into the packet (14 on Ethernet and
/// Linux loopback, 0 on raw IP and on a cooked socket), returning `snaplen` for a packet kept.
pub fn program(
    l3: u32,
    outgoing: SkipOutgoing,
    ports: &[u16],
    snaplen: u32,
) -> anyhow::Result<Vec<Insn>> {
    if ports.len() > MAX_PORTS {
        bail!("--port: at most {MAX_PORTS} ports");
    }
    let mut a = Asm {
        code: Vec::new(),
        labels: Vec::new(),
    };
    let reject = To::L(Label::Reject);
    match outgoing {
        SkipOutgoing::Never => {}
        SkipOutgoing::Always => {
            a.op(LD_W_ABS, AD_PKTTYPE);
            a.jump(JEQ_K, PACKET_OUTGOING, reject, To::Next);
        }
        SkipOutgoing::OnInterface(ifindex) => {
            a.op(LD_W_ABS, AD_IFINDEX);
            a.jump(JEQ_K, ifindex, To::Next, To::L(Label::Direction));
            a.op(LD_W_ABS, AD_PKTTYPE);
            a.jump(JEQ_K, PACKET_OUTGOING, reject, To::Next);
            a.label(Label::Direction);
        }
    }
    if ports.is_empty() {
        a.goto(Label::Accept);
        a.label(Label::Reject);
        a.op(RET_K, 0);
    } else {
        a.op(LD_W_ABS, AD_PROTOCOL);
        a.jump(JEQ_K, ETH_P_IP, To::Next, To::L(Label::V6));
        a.op(LD_B_ABS, l3 + 9);
        a.jump(JEQ_K, IPPROTO_TCP, To::Next, reject);
        a.op(LD_H_ABS, l3 + 6);
        a.jump(JSET_K, 0x1fff, reject, To::Next);
        a.op(LDX_B_MSH, l3);
        a.goto(Label::Tcp);
        a.label(Label::V6);
        a.jump(JEQ_K, ETH_P_IPV6, To::Next, reject);
        a.op(LD_B_ABS, l3 + 6);
        a.op(LDX_IMM, 40);
        ipv6_extension_headers(&mut a, l3);
        // X: where the TCP header starts, after the IP header and its extensions.
        a.label(Label::Tcp);
        a.op(LD_H_IND, l3);
        a.any_port(ports);
        a.op(LD_H_IND, l3 + 2);
        a.any_port(ports);
        a.label(Label::Reject);
        a.op(RET_K, 0);
    }
    a.label(Label::Accept);
    a.op(RET_K, snaplen);
    a.finish()
}

/// With A the IPv6 next header and X the offset of what it announces (from `l3`), steps over
/// up to [`IPV6_EXTENSION_HOPS`] extension headers, then goes to `Tcp` with X at the TCP
/// header, or rejects. A non-first fragment has no TCP header and is rejected.
fn ipv6_extension_headers(a: &mut Asm, l3: u32) {
    let reject = To::L(Label::Reject);
    for hop in 0..IPV6_EXTENSION_HOPS {
        a.label(Label::Hop(hop));
        a.jump(JEQ_K, IPPROTO_TCP, To::L(Label::Tcp), To::Next);
        a.jump(
            JEQ_K,
            IPPROTO_FRAGMENT,
            To::L(Label::Fragment(hop)),
            To::Next,
        );
        a.jump(
            JEQ_K,
            IPPROTO_HOPOPTS,
            To::L(Label::Extension(hop)),
            To::Next,
        );
        a.jump(
            JEQ_K,
            IPPROTO_ROUTING,
            To::L(Label::Extension(hop)),
            To::Next,
        );
        a.jump(JEQ_K, IPPROTO_DSTOPTS, To::Next, reject);
        // Hop-by-hop, routing, destination options: (length + 1) × 8 bytes.
        a.label(Label::Extension(hop));
        a.op(LD_B_IND, l3);
        a.op(ST, 0);
        a.op(LD_B_IND, l3 + 1);
        a.op(ADD_K, 1);
        a.op(LSH_K, 3);
        a.op(ADD_X, 0);
        a.op(TAX, 0);
        a.op(LD_MEM, 0);
        a.goto(Label::Hop(hop + 1));
        // Fragment: 8 bytes; the offset (high 13 bits of bytes 2-3) must be 0.
        a.label(Label::Fragment(hop));
        a.op(LD_H_IND, l3 + 2);
        a.jump(JSET_K, 0xfff8, reject, To::Next);
        a.op(LD_B_IND, l3);
        a.op(ST, 0);
        a.op(TXA, 0);
        a.op(ADD_K, 8);
        a.op(TAX, 0);
        a.op(LD_MEM, 0);
    }
    a.label(Label::Hop(IPV6_EXTENSION_HOPS));
    a.jump(JEQ_K, IPPROTO_TCP, To::Next, reject);
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
