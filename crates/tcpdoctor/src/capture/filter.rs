//! The classic BPF program attached to the capture socket: which packets the kernel copies
//! into the ring, and how many bytes of each.
//!
//! Filtering in the kernel is what keeps drops and CPU down under load: a packet the filter
//! rejects is never copied, and the filter's return value is the snap length, so an accepted
//! packet costs only that many bytes of ring. Rules:
//! 1. On loopback every packet passes the tap twice (sent, then received); only the received
//!    copy is kept, as tcpdump does.
//! 2. Without ports, every packet is accepted (cut to the snap length).
//! 3. With ports: IPv4 or IPv6 (the protocol from the kernel's metadata, so the same program
//!    serves Ethernet and raw-IP links), TCP, and the source or destination port in the set.
//!    IPv4 fragments after the first carry no TCP header and are rejected; IPv6 packets whose
//!    TCP header follows extension headers are not recognised (rare on TCP).

use anyhow::bail;

pub const MAX_PORTS: usize = 32;

const LD_W_ABS: u16 = 0x20;
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_H_IND: u16 = 0x48;
const LDX_B_MSH: u16 = 0xb1;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

const AD_OFF: u32 = 0xffff_f000; // SKF_AD_OFF (-0x1000)
const AD_PROTOCOL: u32 = AD_OFF; // + SKF_AD_PROTOCOL (0)
const AD_PKTTYPE: u32 = AD_OFF + 4;
const PACKET_OUTGOING: u32 = 4;
const ETH_P_IP: u32 = 0x0800;
const ETH_P_IPV6: u32 = 0x86dd;
const IPPROTO_TCP: u32 = 6;

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
    V6,
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
            let (jt, jf) = (rel(jt)?, rel(jf)?);
            out.push(Insn { code, jt, jf, k });
        }
        Ok(out)
    }
}

/// The filter for a link whose IP header starts `l3` bytes into the frame (14 on Ethernet and
/// Linux loopback, 0 on raw IP).
pub fn program(l3: u32, loopback: bool, ports: &[u16], snaplen: u32) -> anyhow::Result<Vec<Insn>> {
    if ports.len() > MAX_PORTS {
        bail!("--port: at most {MAX_PORTS} ports");
    }
    let mut a = Asm {
        code: Vec::new(),
        labels: Vec::new(),
    };
    let reject = To::L(Label::Reject);
    if loopback {
        a.op(LD_W_ABS, AD_PKTTYPE);
        a.jump(JEQ_K, PACKET_OUTGOING, reject, To::Next);
    }
    if !ports.is_empty() {
        a.op(LD_W_ABS, AD_PROTOCOL);
        a.jump(JEQ_K, ETH_P_IP, To::Next, To::L(Label::V6));
        a.op(LD_B_ABS, l3 + 9);
        a.jump(JEQ_K, IPPROTO_TCP, To::Next, reject);
        a.op(LD_H_ABS, l3 + 6);
        a.jump(JSET_K, 0x1fff, reject, To::Next);
        a.op(LDX_B_MSH, l3);
        a.op(LD_H_IND, l3);
        a.any_port(ports);
        a.op(LD_H_IND, l3 + 2);
        a.any_port(ports);
        a.jump(JA, 0, To::Next, To::Next);
        let ja = a.code.len() - 1;
        a.label(Label::V6);
        a.jump(JEQ_K, ETH_P_IPV6, To::Next, reject);
        a.op(LD_B_ABS, l3 + 6);
        a.jump(JEQ_K, IPPROTO_TCP, To::Next, reject);
        a.op(LD_H_ABS, l3 + 40);
        a.any_port(ports);
        a.op(LD_H_ABS, l3 + 42);
        a.any_port(ports);
        a.label(Label::Reject);
        a.op(RET_K, 0);
        // The IPv4 path's "no port matched" jumps over the IPv6 block to Reject.
        a.code[ja].3 = (a.code.len() - 1 - (ja + 1)) as u32;
    } else {
        a.jump(JA, 1, To::Next, To::Next);
        a.label(Label::Reject);
        a.op(RET_K, 0);
    }
    a.label(Label::Accept);
    a.op(RET_K, snaplen);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdoctor_core::wire::write::ipv4_tcp_packet;

    /// Runs `prog` the way the kernel does for the instructions [`program`] emits.
    fn run(prog: &[Insn], pkt: &[u8], protocol: u32, pkttype: u32) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let ld = |at: usize, n: usize| -> Option<u32> {
            let b = pkt.get(at..at + n)?;
            Some(b.iter().fold(0u32, |v, &c| (v << 8) | u32::from(c)))
        };
        for _ in 0..1000 {
            let i = prog[pc];
            pc += 1;
            let k = i.k as usize;
            let loaded = match i.code {
                LD_W_ABS if i.k == AD_PROTOCOL => Some(protocol),
                LD_W_ABS if i.k == AD_PKTTYPE => Some(pkttype),
                LD_H_ABS => ld(k, 2),
                LD_B_ABS => ld(k, 1),
                LD_H_IND => ld(x as usize + k, 2),
                LDX_B_MSH => {
                    let Some(b) = ld(k, 1) else { return 0 };
                    x = (b & 0xf) * 4;
                    continue;
                }
                JA => {
                    pc += k;
                    continue;
                }
                JEQ_K | JSET_K => {
                    let hit = if i.code == JEQ_K {
                        a == i.k
                    } else {
                        a & i.k != 0
                    };
                    pc += usize::from(if hit { i.jt } else { i.jf });
                    continue;
                }
                RET_K => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            };
            match loaded {
                Some(v) => a = v,
                None => return 0, // out of bounds: the kernel rejects the packet
            }
        }
        panic!("filter did not return");
    }

    fn eth(ip: Vec<u8>, ethertype: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend(ethertype.to_be_bytes());
        f.extend(ip);
        f
    }

    fn v4(sport: u16, dport: u16) -> Vec<u8> {
        let s = format!("127.0.0.1:{sport}").parse().unwrap();
        let d = format!("127.0.0.1:{dport}").parse().unwrap();
        eth(
            ipv4_tcp_packet(s, d, 1, 2, 0x18, 100, None, b"hi", 2),
            0x0800,
        )
    }

    fn v6(sport: u16, dport: u16, next: u8) -> Vec<u8> {
        let mut ip = vec![0x60, 0, 0, 0, 0, 20, next, 64];
        ip.extend([0u8; 32]);
        ip.extend(sport.to_be_bytes());
        ip.extend(dport.to_be_bytes());
        ip.extend([0u8; 16]);
        eth(ip, 0x86dd)
    }

    #[test]
    fn ports_match_either_direction_on_ipv4_and_ipv6() {
        let p = program(14, false, &[6379, 8080], 256).unwrap();
        let cases = [
            (v4(40000, 6379), 0x0800, 256),
            (v4(8080, 40000), 0x0800, 256),
            (v4(40000, 6380), 0x0800, 0),
            (v6(40000, 8080, 6), 0x86dd, 256),
            (v6(6379, 1, 6), 0x86dd, 256),
            (v6(6379, 1, 17), 0x86dd, 0),
            (v6(5, 6, 6), 0x86dd, 0),
        ];
        for (i, (pkt, proto, want)) in cases.iter().enumerate() {
            assert_eq!(run(&p, pkt, *proto, 0), *want, "case {i}");
        }
    }

    #[test]
    fn rejects_udp_fragments_and_other_protocols() {
        let p = program(14, false, &[53], 128).unwrap();
        let mut udp = v4(53, 53);
        udp[14 + 9] = 17;
        assert_eq!(run(&p, &udp, 0x0800, 0), 0);
        let mut frag = v4(53, 53);
        frag[14 + 7] = 0x10; // fragment offset 16 (×8 bytes)
        assert_eq!(run(&p, &frag, 0x0800, 0), 0);
        assert_eq!(run(&p, &v4(53, 1), 0x0806, 0), 0);
        assert_eq!(run(&p, &v4(53, 1)[..30], 0x0800, 0), 0, "cut short");
    }

    #[test]
    fn loopback_keeps_only_the_received_copy() {
        for ports in [&[][..], &[80][..]] {
            let p = program(14, true, ports, 96).unwrap();
            assert_eq!(run(&p, &v4(80, 9), 0x0800, 0), 96);
            assert_eq!(run(&p, &v4(80, 9), 0x0800, PACKET_OUTGOING), 0);
        }
    }

    #[test]
    fn raw_ip_links_and_the_port_limit() {
        let p = program(0, false, &[80], 200).unwrap();
        assert_eq!(run(&p, &v4(80, 9)[14..], 0x0800, 0), 200);
        let all: Vec<u16> = (1..=MAX_PORTS as u16).collect();
        let p = program(14, true, &all, 64).unwrap();
        assert_eq!(run(&p, &v4(9, MAX_PORTS as u16), 0x0800, 0), 64);
        assert_eq!(run(&p, &v6(MAX_PORTS as u16 + 1, 40000, 6), 0x86dd, 0), 0);
        assert!(program(14, false, &[1; MAX_PORTS + 1], 64).is_err());
    }
}
