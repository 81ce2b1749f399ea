//! `tcpdoctor sandbox --delay D`: the user's own server and client at the two ends of a WAN
//! path (two network namespaces, a delay line, real kernel TCP at both ends), no root.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::capture::stop;
use crate::wan::netns::NotListening;
use crate::wan::{Captures, WanPath, FAR_ADDR};
use tcpdoctor_core::impair::PathSpec;

/// What `sandbox --delay` was asked.
pub struct WanSandbox<'a> {
    pub spec: PathSpec,
    pub server: Option<&'a str>,
    pub server_port: Option<u16>,
    pub ready_timeout: Duration,
    pub write: Option<&'a Path>,
    pub command: &'a [String],
}

/// The far end's capture beside the near one: `run.pcapng` → `run.server.pcapng`.
pub fn far_capture_path(near: &Path) -> PathBuf {
    let stem = near
        .file_stem()
        .map_or("capture".into(), |s| s.to_string_lossy());
    near.with_file_name(format!("{stem}.server.pcapng"))
}

fn shell(words: &[String]) -> Command {
    if words.len() == 1 {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(&words[0]);
        c
    } else {
        let mut c = Command::new(&words[0]);
        c.args(&words[1..]);
        c
    }
}

pub fn run(w: WanSandbox) -> anyhow::Result<u8> {
    let captures = w.write.map(|near| Captures {
        near: near.to_path_buf(),
        far: far_capture_path(near),
    });
    crate::sandbox::namespace::enter_net()?;
    let path = WanPath::open(&w.spec, captures)?;
    stop::install();
    let mut group = 0;
    let mut server: Option<Child> = None;
    if let Some(cmd) = w.server {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(cmd).process_group(0);
        path.ns.spawn_in_far(&mut c);
        keep_net_raw(&mut c);
        let child = c.spawn().context("starting --server")?;
        group = child.id() as libc::pid_t;
        stop::kill_group_on_stop(group);
        server = Some(child);
    }
    let result = (|| -> anyhow::Result<i32> {
        if let (Some(port), Some(s)) = (w.server_port, server.as_mut()) {
            wait_ready(&path.ns, s, port, w.ready_timeout)?;
        }
        // The client joins the server's process group (one group for Ctrl-C to end), unless
        // the server's command has already ended and taken the group with it.
        if let Some(s) = server.as_mut() {
            if s.try_wait()?.is_some() {
                group = 0;
            }
        }
        let mut c = shell(w.command);
        c.env("TCPDOCTOR_SERVER_HOST", FAR_ADDR.to_string())
            .process_group(group);
        keep_net_raw(&mut c);
        if let Some(port) = w.server_port {
            c.env("TCPDOCTOR_SERVER", format!("{FAR_ADDR}:{port}"));
        }
        let mut client = c.spawn().context("starting the command")?;
        if group == 0 {
            stop::kill_group_on_stop(client.id() as libc::pid_t);
        }
        let status = client.wait().context("waiting for the command")?;
        use std::os::unix::process::ExitStatusExt;
        Ok(status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    })();
    if let Some(mut s) = server {
        let pgid = s.id() as libc::pid_t;
        crate::run::server::stop_group(&mut s, pgid);
        // And whatever it left in the far namespace (a daemon outside its process group).
        path.ns.stop_far_processes(Duration::from_secs(2));
    }
    let stats = path.stop()?;
    eprintln!("tcpdoctor: sandbox: path {}: {}", w.spec, stats.describe());
    if let Some(near) = w.write {
        eprintln!(
            "tcpdoctor: sandbox: wrote {} (the client's end) and {} (the server's end)",
            near.display(),
            far_capture_path(near).display()
        );
    }
    let status = if stop::interrupted() { 130 } else { result? };
    if status != 0 {
        eprintln!("tcpdoctor: sandbox: the command exited with status {status}");
    }
    Ok(u8::try_from(status).unwrap_or(u8::MAX))
}

/// Lets the command keep CAP_NET_RAW across its exec (an ambient capability): a user's own
/// `tcpdump -i tdnear0` (or `tdfar0` in the server's command) captures at its end's device
/// with the kernel's timestamps. This process holds every capability in the user namespace it
/// made (which owns both network namespaces), so the capability reaches nothing on the host.
/// Where the kernel refuses (no ambient capabilities: Linux < 4.3), the command runs without.
fn keep_net_raw(cmd: &mut Command) {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_NET_RAW: u32 = 13;
    // SAFETY: only raw syscalls (capget, capset, prctl) on this process between fork and exec,
    // on stack memory; failures are ignored (the command then runs without the capability).
    unsafe {
        cmd.pre_exec(|| {
            let mut hdr = Header {
                version: VERSION_3,
                pid: 0,
            };
            let mut data = [Data::default(); 2];
            if libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) == 0
                && data[0].permitted & (1 << CAP_NET_RAW) != 0
            {
                data[0].inheritable |= 1 << CAP_NET_RAW;
                if libc::syscall(libc::SYS_capset, &hdr, data.as_ptr()) == 0 {
                    libc::prctl(
                        libc::PR_CAP_AMBIENT,
                        libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                        CAP_NET_RAW as libc::c_ulong,
                        0 as libc::c_ulong,
                        0 as libc::c_ulong,
                    );
                }
            }
            Ok(())
        });
    }
}

/// Waits until a socket in the far namespace listens on `port` (read from its own
/// /proc/net/tcp{,6}: no probe connection the server would have to accept), or fails naming why.
fn wait_ready(
    ns: &crate::wan::Namespaces,
    server: &mut Child,
    port: u16,
    limit: Duration,
) -> anyhow::Result<()> {
    match ns.wait_listening(port, limit, || server.try_wait())? {
        Ok(()) => Ok(()),
        Err(NotListening::Interrupted) => {
            bail!("interrupted while waiting for the server to listen on port {port}")
        }
        Err(NotListening::Exited(st)) => {
            bail!("the server exited ({st}) before it listened on port {port}")
        }
        Err(NotListening::TimedOut) => bail!(
            "nothing listened on port {port} in the server's namespace within {} (is \
             --server-port the port the server listens on?)",
            tcpdoctor_core::units::fmt_duration(limit)
        ),
    }
}
