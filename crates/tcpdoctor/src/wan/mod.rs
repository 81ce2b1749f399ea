//! A WAN path between two network namespaces on this machine, with real kernel TCP at both
//! ends and no privilege: the near namespace holds tcpdoctor and the client's sockets, the far
//! one the server, and a delay line ([`line`]) moves every IP packet between their TUN devices
//! through the core's impairment pipelines.
//!
//! Addresses: near is [`NEAR_ADDR`], far is [`FAR_ADDR`]; a server in far that listens on
//! 127.0.0.1 (or on every address) is reached at `FAR_ADDR:PORT` from near.

pub mod line;
pub mod netns;
pub mod tun;

use std::net::Ipv4Addr;
use std::time::Duration;

use tcpdoctor_core::impair::{Delay, Pipeline};

pub use line::{Captures, Line, LineStats};
pub use netns::Namespaces;
use tun::Tun;

/// The client's end of the path.
pub const NEAR_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The server's end of the path, as the client reaches it.
pub const FAR_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The devices' MTU: a common Ethernet path.
pub const DEFAULT_MTU: u32 = 1500;

/// One-way delays of a path (the impairments the line applies for now).
#[derive(Clone, Copy, Debug)]
pub struct PathDelays {
    pub c2s: Duration,
    pub s2c: Duration,
    pub jitter: Duration,
    pub seed: u64,
}

/// The two namespaces and the line between them.
pub struct WanPath {
    pub ns: Namespaces,
    line: Line,
}

impl WanPath {
    /// Builds the far namespace and the line. Call inside the user and network namespace
    /// tcpdoctor entered (that one becomes near).
    pub fn open(delays: PathDelays, mtu: u32, captures: Option<Captures>) -> anyhow::Result<Self> {
        let (ns, far) = Namespaces::create(|| {
            let t = Tun::create("tdfar0", FAR_ADDR, NEAR_ADDR, mtu)?;
            t.route_localnet()?;
            Ok(t)
        })?;
        let near = Tun::create("tdnear0", NEAR_ADDR, FAR_ADDR, mtu)?;
        let pipe = |d: Duration, seed: u64| {
            Pipeline::new(vec![Box::new(Delay::new(d, delays.jitter, seed))])
        };
        let line = Line::start(
            near,
            far,
            FAR_ADDR,
            pipe(delays.c2s, delays.seed),
            pipe(delays.s2c, delays.seed.wrapping_add(1)),
            captures,
        )?;
        Ok(WanPath { ns, line })
    }

    /// Stops the line; what it carried.
    pub fn stop(self) -> anyhow::Result<LineStats> {
        self.line.stop()
    }
}
