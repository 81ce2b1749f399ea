//! `tcpdoctor sandbox --delay D`: the user's own server and client at the two ends of a WAN
//! path (two network namespaces, a delay line, real kernel TCP at both ends), no root.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};

use super::analyze::{analyze_file, emit, FailOn, Format};
use crate::capture::stop;
use crate::run::server_proc::{Proc, Waitable};
use crate::trace::Spawned;
use crate::wan::netns::NotListening;
use crate::wan::{Captures, WanPath, FAR_ADDR};
use tcpdoctor_core::ends::{compare, EndCapture};
use tcpdoctor_core::impair::PathSpec;
use tcpdoctor_core::report::Report;
use tcpdoctor_core::syscalls::{Trace, TraceStatus};

use crate::{EXIT_CLEAN, EXIT_FOUND};

/// What `sandbox --delay` was asked.
pub struct WanSandbox<'a> {
    pub spec: PathSpec,
    pub server: Option<&'a str>,
    pub server_port: Option<u16>,
    pub ready_timeout: Duration,
    pub write: Option<&'a Path>,
    /// `--analyze`: the format and `--fail-on` of the analysis of both ends.
    pub analyze: Option<(Format, Vec<FailOn>)>,
    pub command: &'a [String],
    /// Trace the server's and the command's system calls (`crate::trace`).
    pub trace: bool,
}

/// Starts `cmd` traced when `trace` (untraced, saying why, where tracing is refused).
fn start(cmd: Command, trace: bool, what: &str) -> anyhow::Result<Proc> {
    if !trace {
        let mut cmd = cmd;
        return Ok(Proc::Plain(cmd.spawn()?, TraceStatus::Off));
    }
    Ok(match crate::trace::spawn(cmd)? {
        Spawned::Traced(t) => Proc::Traced(t),
        Spawned::Untraced(c, reason) => {
            eprintln!("tcpdoctor: sandbox: the {what} runs untraced: {reason}");
            Proc::Plain(c, TraceStatus::Unavailable { reason })
        }
    })
}

/// Waits for `p` to exit.
fn wait_exit(p: &mut Proc) -> std::io::Result<std::process::ExitStatus> {
    loop {
        if let Some(s) = p.try_wait()? {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Where the captures go when `--analyze` is given without `-w`: a directory of this process,
/// removed when the analysis is done.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The far end's capture beside the near one: `run.pcapng` → `run.server.pcapng`.
pub fn far_capture_path(near: &Path) -> PathBuf {
    let stem = near
        .file_stem()
        .map_or("capture".into(), |s| s.to_string_lossy());
    near.with_file_name(format!("{stem}.server.pcapng"))
}

pub fn run(w: WanSandbox) -> anyhow::Result<u8> {
    let scratch = match (w.write, &w.analyze) {
        (None, Some(_)) => {
            let dir = crate::scratch::private_dir(&std::env::temp_dir(), "tcpdoctor-sandbox")
                .context("creating a directory for the captures under the temporary directory")?;
            Some(Scratch(dir))
        }
        _ => None,
    };
    let near_file = w
        .write
        .map(Path::to_path_buf)
        .or_else(|| scratch.as_ref().map(|s| s.0.join("client.pcapng")));
    let captures = near_file.as_ref().map(|near| Captures {
        near: near.clone(),
        far: far_capture_path(near),
    });
    crate::sandbox::namespace::enter_net()?;
    let path = WanPath::open(&w.spec, captures)?;
    stop::install();
    let mut group = 0;
    let mut server: Option<Proc> = None;
    if let Some(cmd) = w.server {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(cmd).process_group(0);
        path.ns.spawn_in_far(&mut c);
        keep_net_raw(&mut c);
        let child = start(c, w.trace, "server").context("starting --server")?;
        group = child.id() as libc::pid_t;
        stop::kill_group_on_stop(group);
        server = Some(child);
    }
    let mut traces: Vec<(&str, Trace)> = Vec::new();
    let mut known_port: Option<u16> = None;
    let result = (|| -> anyhow::Result<i32> {
        let port = match server.as_mut() {
            Some(s) => wait_ready(&path.ns, s, w.server_port, w.ready_timeout)?,
            None => w.server_port,
        };
        known_port = port;
        // The client joins the server's process group (one group for Ctrl-C to end), unless
        // the server's command has already ended and taken the group with it.
        if let Some(s) = server.as_mut() {
            if s.try_wait()?.is_some() {
                group = 0;
            }
        }
        let mut c = crate::sandbox::command(w.command);
        c.env("TCPDOCTOR_SERVER_HOST", FAR_ADDR.to_string())
            .process_group(group);
        keep_net_raw(&mut c);
        if let Some(port) = port {
            c.env("TCPDOCTOR_SERVER", format!("{FAR_ADDR}:{port}"));
        }
        let mut client = start(c, w.trace, "command").context("starting the command")?;
        if group == 0 {
            stop::kill_group_on_stop(client.id() as libc::pid_t);
        }
        let status = wait_exit(&mut client).context("waiting for the command")?;
        traces.push(("client", client.take_trace()));
        use std::os::unix::process::ExitStatusExt;
        Ok(status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    })();
    if let Some(mut s) = server {
        traces.push(("server", s.take_trace()));
        let pgid = s.id() as libc::pid_t;
        crate::run::server::stop_group(&mut s, pgid);
        // And whatever it left in the far namespace (a daemon outside its process group).
        path.ns.stop_far_processes(Duration::from_secs(2));
    }
    let stats = path.stop()?;
    eprintln!("tcpdoctor: sandbox: path {}: {}", w.spec, stats.describe());
    if let (Some(near), None) = (&near_file, &scratch) {
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
    let found = match (&w.analyze, &near_file) {
        (Some((format, fail_on)), Some(near)) if !stop::interrupted() => {
            analyze_ends(near, *format, fail_on, &traces, known_port)?
        }
        _ => EXIT_CLEAN,
    };
    if scratch.is_some() && w.analyze.is_some() {
        eprintln!(
            "tcpdoctor: sandbox: the captures were analysed and removed (-w FILE keeps them)"
        );
    }
    drop(scratch);
    Ok(if status != 0 {
        u8::try_from(status).unwrap_or(u8::MAX)
    } else {
        found
    })
}

/// `--analyze`: both ends' captures analysed as `analyze --ends` does; the exit code --fail-on
/// asks for, or 1 when no request crossed the path and was answered (a client that could not
/// connect is not a clean run: it is said, never "No findings").
fn analyze_ends(
    near: &Path,
    format: Format,
    fail_on: &[FailOn],
    traces: &[(&str, Trace)],
    port: Option<u16>,
) -> anyhow::Result<u8> {
    let far = far_capture_path(near);
    let mut captures = Vec::new();
    let mut findings = Vec::new();
    let mut ends = Vec::new();
    for file in [near.to_path_buf(), far] {
        let mut end = EndCapture::new(&file.display().to_string());
        match analyze_file(&file, Some(&mut end)) {
            Ok((summary, mut found)) => {
                // Each program's calls, joined to this end's frames: the far end maps the
                // line's address to the server's own, so each program is readdressed as this
                // end sees it.
                let near_end = file.as_path() == near;
                let server = traces.iter().find(|(w, _)| *w == "server").map(|(_, t)| t);
                for (who, t) in traces {
                    let seen = match (port, *who, near_end, server) {
                        (Some(p), "server", true, _) => {
                            crate::run::syscalls::server_seen_from_near(t, p)
                        }
                        (Some(p), "client", false, Some(s)) => {
                            crate::run::syscalls::client_seen_from_far(t, s, p)
                        }
                        _ => t.clone(),
                    };
                    let t = &seen;
                    if let Err(e) = crate::run::syscalls::cite_from(&mut found, t, &file) {
                        eprintln!(
                            "tcpdoctor: sandbox: the {who}'s system calls were not joined to {}: {e:#}",
                            file.display()
                        );
                    }
                }
                captures.push(summary);
                findings.extend(found);
                ends.push(end);
            }
            Err(e) => {
                eprintln!(
                    "tcpdoctor: sandbox: nothing to analyse: {e:#} (did the command reach the \
                     server at {FAR_ADDR}?)"
                );
                return Ok(EXIT_FOUND);
            }
        }
    }
    let carried: u64 = captures
        .iter()
        .flat_map(|c| &c.servers)
        .map(|s| s.bytes_to_server + s.bytes_to_client)
        .sum();
    let exchanges: u64 = captures.iter().map(|c| c.exchanges).sum();
    let mut report = Report::new(captures, findings);
    report.syscalls = super::capture::program_calls(traces);
    let mut ends = ends.into_iter();
    if let (Some(a), Some(b)) = (ends.next(), ends.next()) {
        report.ends = Some(compare(a, b));
    }
    let code = emit(&report, format, fail_on)?;
    if carried == 0 {
        eprintln!(
            "tcpdoctor: sandbox: no data crossed the path, so there was nothing to judge (did \
             the command connect to the server at {FAR_ADDR}? a client that starts before the \
             server listens is refused: give --server-port PORT)"
        );
        return Ok(EXIT_FOUND);
    }
    if exchanges == 0 {
        eprintln!(
            "tcpdoctor: sandbox: no request crossed the path and was answered (data went one \
             way only), so no exchange was judged"
        );
    }
    Ok(code)
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
/// /proc/net/tcp{,6}: no probe connection the server would have to accept), or, without a
/// port, on any port; the port the command is told (`$TCPDOCTOR_SERVER`), if one is known.
/// Fails naming why the server did not listen.
fn wait_ready(
    ns: &crate::wan::Namespaces,
    server: &mut Proc,
    port: Option<u16>,
    limit: Duration,
) -> anyhow::Result<Option<u16>> {
    let on = port.map_or("any port".to_string(), |p| format!("port {p}"));
    let waited = match port {
        Some(p) => ns
            .wait_listening(p, limit, || server.try_wait())?
            .map(|()| vec![p]),
        None => ns.wait_listening_any(limit, || server.try_wait())?,
    };
    match waited {
        Ok(_) if port.is_some() => Ok(port),
        Ok(ports) => {
            let listed: Vec<String> = ports.iter().map(u16::to_string).collect();
            eprintln!(
                "tcpdoctor: sandbox: the server listens on port {} (to wait for another, give \
                 --server-port)",
                listed.join(", ")
            );
            Ok((ports.len() == 1).then(|| ports[0]))
        }
        Err(NotListening::Interrupted) => {
            bail!("interrupted while waiting for the server to listen on {on}")
        }
        Err(NotListening::Exited(st)) => {
            bail!("the server exited ({st}) before it listened on {on}")
        }
        Err(NotListening::TimedOut) => match port {
            Some(p) => bail!(
                "nothing listened on port {p} in the server's namespace within {} (is \
                 --server-port the port the server listens on?)",
                tcpdoctor_core::units::fmt_duration(limit)
            ),
            None => bail!(
                "nothing listened on any TCP port in the server's namespace within {}, so the \
                 command was not started (give --server-port PORT if the server takes longer to \
                 listen)",
                tcpdoctor_core::units::fmt_duration(limit)
            ),
        },
    }
}
