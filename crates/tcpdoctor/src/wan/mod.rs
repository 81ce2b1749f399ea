//! A WAN path between two network namespaces on this machine, with real kernel TCP at both
//! ends and no privilege: the near namespace holds tcpdoctor and the client's sockets, the far
//! one the server, and a delay line ([`line`]) moves every IP packet between their TUN devices
//! through the core's impairment pipelines.
//!
//! Addresses: near is [`NEAR_ADDR`], far is [`FAR_ADDR`]; a server in far that listens on
//! 127.0.0.1 (or on every address) is reached at `FAR_ADDR:PORT` from near.

pub mod departures;
pub mod line;
pub mod netns;
pub mod tun;

use std::net::Ipv4Addr;

use tcpdoctor_core::flow::Direction;
use tcpdoctor_core::impair::{OneWayPath, PathSpec};

pub use line::{Captures, Line, LineStats, Shape};
pub use netns::Namespaces;
use tun::Tun;

/// The client's end of the path.
pub const NEAR_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The server's end of the path, as the client reaches it.
pub const FAR_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The devices' MTU when the path definition names none: a common Ethernet path.
pub const DEFAULT_MTU: u32 = 1500;

/// The two namespaces and the line between them.
pub struct WanPath {
    pub ns: Namespaces,
    line: Line,
}

impl WanPath {
    /// Builds the far namespace and the line. Call inside the user and network namespace
    /// tcpdoctor entered (that one becomes near).
    pub fn open(spec: &PathSpec, captures: Option<Captures>) -> anyhow::Result<Self> {
        let mtu = spec.mtu.unwrap_or(DEFAULT_MTU);
        let (ns, far) = Namespaces::create(|| {
            let t = Tun::create("tdfar0", FAR_ADDR, NEAR_ADDR, mtu)?;
            t.route_localnet()?;
            Ok(t)
        })?;
        let near = Tun::create("tdnear0", NEAR_ADDR, FAR_ADDR, mtu)?;
        let line = Line::start(
            near,
            far,
            FAR_ADDR,
            OneWayPath::new(spec, Direction::ClientToServer),
            OneWayPath::new(spec, Direction::ServerToClient),
            Shape {
                mtu,
                per_packet: spec.needs_per_packet(),
            },
            captures,
        )?;
        Ok(WanPath { ns, line })
    }

    /// Stops the line; what it carried.
    pub fn stop(self) -> anyhow::Result<LineStats> {
        self.line.stop()
    }
}
