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
use crate::wan::netns::NotListening;
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
        let server = Server::start_with(command, &log, plan.trace, |c| path.ns.spawn_in_far(c))
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
        end.wait_listening(name, target.port(), ready)?;
        Ok(end)
    }

    /// Waits until a socket in the far namespace listens on `port`: no probe connection
    /// through the line (it would be in the captures, and a long path's handshake outlasts a
    /// connect timeout). A command that exits 0 leaving a daemon in far is still starting.
    fn wait_listening(&mut self, name: &str, port: u16, limit: Duration) -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        let server = &mut self.server;
        let waited = self
            .path
            .ns
            .wait_listening(port, limit, || server.exited())?;
        let log = self.server.log.display();
        match waited {
            Ok(()) => {}
            Err(NotListening::Interrupted) => {
                anyhow::bail!("{name}: interrupted while the far server was starting")
            }
            Err(NotListening::Exited(status)) => anyhow::bail!(
                "{name}: the server at the far end exited ({status}) before it listened on port \
                 {port}; its output: {log}"
            ),
            Err(NotListening::TimedOut) => anyhow::bail!(
                "{name}: nothing listened on port {port} in the far namespace within {} of \
                 starting the server there (does it listen on 127.0.0.1:{port} or every \
                 address, as --target says?); its output: {log}",
                tcpdoctor_core::units::fmt_duration(limit)
            ),
        }
        let settle = limit
            .saturating_sub(start.elapsed())
            .min(super::server::SETTLE_LIMIT);
        self.server.wait_settled(settle);
        Ok(())
    }

    /// Stops the far server and anything it left in the far namespace, then the line
    /// (draining what is in flight); the captures.
    pub fn finish(mut self, name: &str) -> anyhow::Result<FarCaptures> {
        self.server.stop();
        self.path.ns.stop_far_processes(Duration::from_secs(2));
        let st = self
            .path
            .stop()
            .with_context(|| format!("{name}: stopping the delay line"))?;
        let carried = st.describe();
        Ok(FarCaptures {
            near: self.near,
            far: self.far,
            carried,
        })
    }
}
