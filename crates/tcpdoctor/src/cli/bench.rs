//! `tcpdoctor bench`: drive a server with a conversation script and measure it.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, ValueEnum};
use tcpdoctor_core::report::render_bench_text;
use tcpdoctor_core::script::{preset_names, Inputs, Script};
use tcpdoctor_core::units::{parse_duration, parse_size};

use crate::bench::{BenchConfig, Bound, SplitWrites};
use crate::cli::proxy::parse_addr;
use crate::{output, EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND};

/// Drive a server with a conversation script: latency histograms, throughput, a stall view.
///
/// Each connection runs the script (a file, or a preset such as resp, http1, echo-line);
/// latency is measured from each request's intended start, so stalls cannot hide queued
/// requests. Closed loop by default (each connection sends when an answer frees one of its
/// --pipeline slots); --rate R is an open loop at R requests/s over all connections.
///
///   tcpdoctor bench --target 127.0.0.1:6379 --preset resp --connections 50 --requests 100000
///   tcpdoctor bench --target 127.0.0.1:6379 --preset resp --pipeline 16 --duration 10s
///   tcpdoctor bench --target 127.0.0.1:8080 --preset http1 --param path=/ --rate 2000
///   tcpdoctor bench --target unix:/run/app.sock --script app.toml --repeat 5
///
/// Reproduce client-side pathologies: --nagle on (TCP_NODELAY cleared on the driver's
/// sockets), --split-writes 2 (each request in two writes: the write-write-read client).
///
/// The stall view counts exchanges near the 40 ms and 200 ms TCP timers and names the likely
/// cause; confirm it with a capture and `tcpdoctor analyze`.
///
/// --dry-run prints the first conversation's requests as they would be sent (secrets
/// masked) and connects to nothing. A script with an `exec` (a value from an outside
/// command) runs only with --allow-exec; one that reads `{env:NAME}` only with
/// --allow-env NAME.
///
/// Exit status: 0 when every run completed, 1 when a run hung (no progress for --hang-after),
/// measured nothing or was interrupted (Ctrl-C prints what was measured), 2 on a usage error,
/// a bad script or an unreachable target.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct BenchArgs {
    /// The server: HOST:PORT, or unix:/path/to.sock (not needed with --dry-run).
    #[arg(long, value_name = "ADDR", required_unless_present = "dry_run")]
    pub target: Option<String>,

    /// A conversation script (TOML). Give it, or a --preset.
    #[arg(long, value_name = "FILE", conflicts_with = "preset")]
    pub script: Option<PathBuf>,

    /// A built-in script: echo, echo-line, resp, http1, memcache, line.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,

    /// A preset's parameter, or a script's `[vars]` entry, KEY=VALUE (repeatable), e.g.
    /// --param path=/ --param size=64, or --param secret=… for a script's `secret`.
    #[arg(long, value_name = "KEY=VALUE")]
    pub param: Vec<String>,

    /// Concurrent connections.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub connections: u64,

    /// Requests in flight per connection (1: strictly one at a time).
    #[arg(long, value_name = "D", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub pipeline: u64,

    /// Open loop: R requests per second over all connections, on a fixed schedule.
    /// Without it, a closed loop.
    #[arg(long, value_name = "R")]
    pub rate: Option<String>,

    /// Open loop: stay awake (yielding, not sleeping) from D before each slot, and look for
    /// answers without sleeping while they come within 200us. A sleeping driver wakes tens of
    /// microseconds late on an idle CPU, and that would be in every latency. The CPU it costs
    /// is reported as spin, apart from the driver's work. 0: sleep (the timer still wakes
    /// early by the wake-up lateness it has learnt, so sends stay on time). At most 1ms.
    /// Default: 60us.
    #[arg(long, value_name = "D")]
    pub spin: Option<String>,

    /// Exchanges to measure, over all connections (after --warmup).
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    pub requests: Option<u64>,

    /// How long to measure (after --warmup), e.g. 10s. Default: 10s unless --requests.
    #[arg(long, value_name = "D")]
    pub duration: Option<String>,

    /// Run this long first without recording, e.g. 2s.
    #[arg(long, value_name = "D", default_value = "0s")]
    pub warmup: String,

    /// An exchange not answered within this counts as a timeout; its connection is reopened.
    #[arg(long, value_name = "D", default_value = "5s")]
    pub timeout: String,

    /// A run in which no exchange completes for this long is reported as hung and abandoned.
    #[arg(long, value_name = "D", default_value = "10s")]
    pub hang_after: String,

    /// Nagle's algorithm on the driver's sockets: off sets TCP_NODELAY.
    #[arg(long, value_name = "on|off", default_value = "off")]
    pub nagle: String,

    /// Write each request in pieces: N (N writes of near-equal size), header (at the header
    /// end the script defines, then the body) or header:B (B bytes, then the rest).
    #[arg(long, value_name = "N|header|header:B")]
    pub split_writes: Option<String>,

    /// The largest response accepted, e.g. 16MiB (overrides the script's `max_response`).
    #[arg(long, value_name = "SIZE")]
    pub max_response: Option<String>,

    /// Run the whole benchmark K times; report mean, stdev, min and max of each figure.
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: u64,

    /// Worker threads (default: one per core, at most one per connection; an open loop one
    /// per 20,000 req/s of --rate unless --spin 0, as each thread spins before its slots; watch
    /// the send lateness, which grows when a thread has more work than time).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,

    /// Seed of random payloads in scripts.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Print the first conversation's requests as they would be sent (escaped, secrets shown
    /// as ***; a value only a response can give shown as its placeholder) and exit 0 without
    /// connecting. --target is not needed (nor contacted); no `exec` is run.
    #[arg(long)]
    pub dry_run: bool,

    /// Let the script's `[[setup]]` run its `exec` commands (once, before the first
    /// connection, each under its timeout). Without it such a script is refused.
    #[arg(long)]
    pub allow_exec: bool,

    /// The environment variables the script may read with `{env:NAME}` (comma-separated or
    /// repeated). A script sends what it reads to its target, so a variable not named here
    /// is refused (the error names each one the script reads).
    #[arg(long, value_name = "NAME[,NAME]", value_delimiter = ',')]
    pub allow_env: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// For machines: schema/bench-report.schema.json.
    Json,
}

fn duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    parse_duration(text).map_err(|e| anyhow!("--{flag} {text}: {e}"))
}

/// How many requests per second one worker thread of an open loop is given by default: a
/// thread that spins before its slots (`--spin`) keeps a CPU busy, so an open loop uses no
/// more threads than its rate needs. A thread's work per request, spinning aside, measured
/// 30–32 µs at 20,000/s against redis (docs/bench.md; that counts the spinning connections'
/// own looks as work): under two thirds of one thread's time.
const OPEN_LOOP_RATE_PER_THREAD: f64 = 20_000.0;

/// The worker threads when `--threads` is not given: one per core, at most one per
/// connection, and for an open loop that spins (`rate`: None for one that does not) at most
/// one per [`OPEN_LOOP_RATE_PER_THREAD`].
fn default_threads(cores: usize, connections: u64, rate: Option<f64>) -> usize {
    let by_rate = rate.map_or(usize::MAX, |r| {
        (r / OPEN_LOOP_RATE_PER_THREAD).ceil().clamp(1.0, 256.0) as usize
    });
    cores.min(connections.min(256) as usize).min(by_rate).max(1)
}

pub(crate) fn positive_duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    let d = duration(flag, text)?;
    if d.is_zero() {
        bail!("--{flag} {text}: must be more than zero");
    }
    Ok(d)
}

fn parse_rate(text: &str) -> anyhow::Result<f64> {
    let t = text.trim();
    let t = t.strip_suffix("/s").unwrap_or(t);
    match t.parse::<f64>() {
        Ok(r) if r.is_finite() && (0.01..=1e9).contains(&r) => Ok(r),
        _ => bail!(
            "--rate {text}: expected requests per second, from 0.01 to 1e9 (e.g. 1000 or 1000/s)"
        ),
    }
}

fn parse_split(text: &str) -> anyhow::Result<SplitWrites> {
    let t = text.trim();
    let bad = || {
        anyhow!("--split-writes {text}: expected N (2 or more pieces), header, or header:B (B ≥ 1 bytes)")
    };
    if t == "header" {
        return Ok(SplitWrites::Header);
    }
    if let Some(b) = t.strip_prefix("header:") {
        return match b.parse::<usize>() {
            Ok(b) if b >= 1 => Ok(SplitWrites::HeaderBytes(b)),
            _ => Err(bad()),
        };
    }
    match t.parse::<usize>() {
        Ok(1) => Ok(SplitWrites::Whole),
        Ok(n) if (2..=65_536).contains(&n) => Ok(SplitWrites::Pieces(n)),
        _ => Err(bad()),
    }
}

fn parse_params(params: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    params
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            // The value may be a secret: not repeated.
            Some(_) => bail!("--param =…: expected KEY=VALUE (the KEY is empty)"),
            _ => bail!("--param {p}: expected KEY=VALUE"),
        })
        .collect()
}

/// The largest script file read (`--script`). A conversation script is a few KiB; this
/// stops a wrong path (`/dev/zero`, a capture, a disk image) from being read until memory
/// runs out.
pub(crate) const MAX_SCRIPT_BYTES: u64 = 4 << 20;

/// A script file's text, at most [`MAX_SCRIPT_BYTES`] (a pipe or a device is read up to one
/// byte past the limit and refused there).
fn read_script(path: &std::path::Path) -> anyhow::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_SCRIPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        bail!(
            "--script {}: more than {} MiB, the most a script may be (a conversation script is \
             a few KiB of TOML: is it the right file?)",
            path.display(),
            MAX_SCRIPT_BYTES >> 20
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "--script {}: not UTF-8 text (byte {} is not), so not a TOML script",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// A script file, or a preset with its `--param`s: the same flags on `bench` and `run`.
/// `allow_env` names the environment variables the script may read (`--allow-env`).
pub(crate) fn load_script(
    script: Option<&std::path::Path>,
    preset: Option<&str>,
    param: &[String],
    allow_env: &[String],
) -> anyhow::Result<Script> {
    let params = parse_params(param)?;
    let allow_env: Vec<String> = allow_env.iter().map(|n| n.trim().to_string()).collect();
    match (script, preset) {
        (Some(path), _) => {
            let src = read_script(path)?;
            // `--param` sets the script's `[vars]`; `{env:NAME}` reads the environment here,
            // once, so the core stays pure, and only the variables `--allow-env` names.
            let env = |name: &str| std::env::var(name).ok();
            let inputs = Inputs {
                vars: &params,
                env: Some(&env),
                allow_env: &allow_env,
            };
            Script::parse_with(&src, &inputs).map_err(|e| anyhow!("{}: {e}", path.display()))
        }
        // The core's error names the presets when the name is unknown.
        (None, Some(name)) => {
            Script::preset(name, &params).map_err(|e| anyhow!("--preset {name}: {e}"))
        }
        (None, None) => bail!(
            "no script: give --script FILE (a TOML conversation, see docs/scripts.md) or \
             --preset NAME (built in: {})",
            preset_names().join(", ")
        ),
    }
}

/// How errors name a script: its file, or `--preset NAME`.
pub(crate) fn script_source(script: Option<&std::path::Path>, preset: Option<&str>) -> String {
    match (script, preset) {
        (Some(p), _) => p.display().to_string(),
        (None, Some(n)) => format!("--preset {n}"),
        (None, None) => "the script".into(),
    }
}

/// `--dry-run`: the first conversation's requests, printed; no connection, no `exec`.
pub(crate) fn dry_run(script: &Script, seed: u64) -> anyhow::Result<u8> {
    let unix_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs());
    output::print(&script.dry_run(seed, unix_secs).render_text())?;
    Ok(EXIT_CLEAN)
}

impl BenchArgs {
    fn load_script(&self) -> anyhow::Result<Script> {
        load_script(
            self.script.as_deref(),
            self.preset.as_deref(),
            &self.param,
            &self.allow_env,
        )
    }

    fn script_source(&self) -> String {
        script_source(self.script.as_deref(), self.preset.as_deref())
    }

    /// Raw flags → a validated config; no I/O except reading the script and name resolution.
    pub fn config(&self) -> anyhow::Result<BenchConfig> {
        let target = parse_addr("target", self.target.as_deref().unwrap_or_default())?;
        let nagle = match self.nagle.trim() {
            "on" => true,
            "off" => false,
            other => bail!("--nagle {other}: expected on or off"),
        };
        let bound = match (&self.requests, &self.duration) {
            (Some(0), _) => bail!("--requests 0: must be 1 or more"),
            (Some(n), _) => Bound::Requests(*n),
            (None, Some(d)) => Bound::Duration(positive_duration("duration", d)?),
            (None, None) => Bound::Duration(Duration::from_secs(10)),
        };
        let timeout = positive_duration("timeout", &self.timeout)?;
        let hang_after = positive_duration("hang-after", &self.hang_after)?;
        let rate = self.rate.as_deref().map(parse_rate).transpose()?;
        let spin = match &self.spin {
            None => crate::bench::DEFAULT_SPIN,
            Some(_) if rate.is_none() => {
                bail!("--spin applies to an open loop: give --rate too (a closed loop sends when an answer comes)")
            }
            Some(text) => {
                let d = duration("spin", text)?;
                if d > crate::proxy::timer::MAX_AWAKE {
                    bail!("--spin {text}: at most 1ms");
                }
                d
            }
        };
        let split = match &self.split_writes {
            Some(s) => parse_split(s)?,
            None => SplitWrites::Whole,
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = match self.threads {
            Some(t) => usize::from(t),
            None => default_threads(cores, self.connections, rate.filter(|_| !spin.is_zero())),
        };
        let mut script = self.load_script()?;
        crate::bench::exec::run_execs(&mut script, self.allow_exec, &self.script_source())?;
        if let Some(m) = &self.max_response {
            let bytes = parse_size(m).map_err(|e| anyhow!("--max-response {m}: {e}"))?;
            if bytes == 0 {
                bail!("--max-response {m}: must be at least one byte");
            }
            script = script.with_max_response(usize::try_from(bytes).unwrap_or(usize::MAX));
        }
        Ok(BenchConfig {
            target,
            script: Arc::new(script),
            connections: self.connections,
            pipeline: self.pipeline as usize,
            rate,
            spin,
            bound,
            warmup: duration("warmup", &self.warmup)?,
            timeout,
            hang_after,
            nagle,
            split,
            repeat: self.repeat,
            threads,
            seed: self.seed,
            progress: std::io::stderr().is_terminal(),
            watch_pid: None,
            timeline: None,
            message_ends: None,
        })
    }
}

pub fn run(args: BenchArgs) -> anyhow::Result<u8> {
    if args.dry_run {
        return match args.load_script() {
            Ok(script) => dry_run(&script, args.seed),
            Err(e) => {
                eprintln!("tcpdoctor: error: {e:#}");
                Ok(EXIT_ERROR)
            }
        };
    }
    let cfg = match args.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcpdoctor: error: {e:#}");
            return Ok(EXIT_ERROR);
        }
    };
    let rt = super::runtime(cfg.threads)?;
    let report = match rt.block_on(crate::bench::run(Arc::new(cfg))) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tcpdoctor: error: {e}");
            return Ok(EXIT_ERROR);
        }
    };
    let text = match args.format {
        Format::Text => render_bench_text(&report),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&report).context("serialising the report")?;
            s.push('\n');
            s
        }
    };
    output::print(&text)?;
    Ok(if report.all_completed() {
        EXIT_CLEAN
    } else {
        EXIT_FOUND
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_loop_gets_a_thread_per_20000_requests_per_second() {
        assert_eq!(default_threads(8, 50, None), 8, "closed loop: one per core");
        assert_eq!(default_threads(8, 3, None), 3, "at most one per connection");
        assert_eq!(default_threads(2, 4, Some(20_000.0)), 1);
        assert_eq!(default_threads(8, 50, Some(20_001.0)), 2);
        assert_eq!(default_threads(8, 50, Some(1e9)), 8, "never past the cores");
        assert_eq!(default_threads(8, 2, Some(1e6)), 2, "nor the connections");
        assert_eq!(default_threads(1, 1, Some(0.01)), 1);
    }

    #[test]
    fn split_writes_syntax() {
        assert_eq!(parse_split("2").ok(), Some(SplitWrites::Pieces(2)));
        assert_eq!(parse_split("1").ok(), Some(SplitWrites::Whole));
        assert_eq!(parse_split("header").ok(), Some(SplitWrites::Header));
        assert_eq!(
            parse_split("header:8").ok(),
            Some(SplitWrites::HeaderBytes(8))
        );
        for bad in ["0", "header:0", "header:x", "many", "-3"] {
            let e = parse_split(bad).expect_err(bad).to_string();
            assert!(e.starts_with("--split-writes"), "{e}");
        }
    }

    #[test]
    fn rate_syntax() {
        assert_eq!(parse_rate("1000").ok(), Some(1000.0));
        assert_eq!(parse_rate("250.5/s").ok(), Some(250.5));
        for bad in ["0", "-1", "fast", "inf", "NaN"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn params_are_key_value() {
        let p = parse_params(&["path=/a=b".into(), "size=64".into()]).expect("valid");
        assert_eq!(p[0], ("path".to_string(), "/a=b".to_string()));
        assert!(parse_params(&["=x".into()]).is_err());
        assert!(parse_params(&["novalue".into()]).is_err());
    }
}
