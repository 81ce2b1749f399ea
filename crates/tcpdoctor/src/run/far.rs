//! The far end of a `wan:` scenario: the delay line between two network namespaces and the
//! user's server started again in the far one, listening where its command says (127.0.0.1
//! works: the line readdresses), reached by the driver at [`FAR_ADDR`].
//!
//! One far end per scenario: the path is built, the server started and waited for, the
//! scenario driven, then the server stopped and the line drained and stopped — which writes
//! the captures of both ends.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tcpdoctor_core::impair::PathSpec;

use super::server::Server;
use super::Plan;
use crate::proxy::Addr;
use crate::wan::{Captures, WanPath, FAR_ADDR};

pub struct FarEnd {
    path: WanPath,
    pub server: Server,
    /// Where the driver reaches the server.
    pub addr: SocketAddr,
    near: PathBuf,
    far: PathBuf,
}

/// What the line left: both ends' captures and what it carried, in words.
pub struct FarCaptures {
    pub near: PathBuf,
    pub far: PathBuf,
    pub carried: String,
}

impl FarEnd {
    /// Builds the path of `spec`, starts `command` at its far end and waits (up to `ready`)
    /// until the server accepts through the line.
    pub fn open(
        plan: &Plan,
        name: &str,
        spec: &PathSpec,
        command: &str,
        ready: Duration,
    ) -> anyhow::Result<FarEnd> {
        let Addr::Tcp(target) = &plan.target else {
            anyhow::bail!(
                "{name}: a wan: path carries TCP/IP; the target is a Unix socket (use \
                 proxy-delay:D to delay it through a hop)"
            );
        };
        let near = plan.file(name, "near.pcapng");
        let far = plan.file(name, "far.pcapng");
        let path = WanPath::open(
            spec,
            Some(Captures {
                near: near.clone(),
                far: far.clone(),
            }),
        )
        .with_context(|| format!("{name}: building the path"))?;
        let log = plan.file(name, "server.log");
        let server = Server::start_with(command, &log, |c| path.ns.spawn_in_far(c))
            .with_context(|| format!("{name}: starting the server at the far end"))?;
        crate::capture::stop::kill_group_on_stop(server.pgid());
        let addr = SocketAddr::from((FAR_ADDR, target.port()));
        let mut end = FarEnd {
            path,
            server,
            addr,
            near,
            far,
        };
        end.server
            .wait_ready(&Addr::Tcp(addr), ready)
            .with_context(|| format!("{name}: the server at the far end of the path"))?;
        Ok(end)
    }

    /// Stops the far server, then the line (draining what is in flight); the captures.
    pub fn finish(mut self, name: &str) -> anyhow::Result<FarCaptures> {
        self.server.stop();
        let st = self
            .path
            .stop()
            .with_context(|| format!("{name}: stopping the delay line"))?;
        let dropped = st.c2s.dropped_loss
            + st.c2s.dropped_queue
            + st.c2s.dropped_mtu
            + st.s2c.dropped_loss
            + st.s2c.dropped_queue
            + st.s2c.dropped_mtu;
        Ok(FarCaptures {
            near: self.near,
            far: self.far,
            carried: format!(
                "the line carried {} packets, dropped {dropped} as the path definition asked",
                st.c2s_packets + st.s2c_packets
            ),
        })
    }
}
