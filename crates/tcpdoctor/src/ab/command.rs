//! Command mode: one run is the user's own benchmark command (a client/server pair it starts
//! itself), run with `sh -c` in its own process group; its figures are its wall time and what
//! `--figure NAME:DIR=REGEX` reads from its standard output (the last match).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use regex::Regex;
use tcpdoctor_core::ab::{Better, FigureSpec, Outcome};

use super::watch::{watch, LastLine, Stop};
use super::RunResult;

/// The figure every command run gives.
pub const WALL: &str = "wall time";

/// A figure read from the output.
#[derive(Clone, Debug)]
pub struct OutputFigure {
    pub spec: FigureSpec,
    pub regex: Regex,
}

/// Parses `NAME:higher=REGEX` or `NAME:lower=REGEX`; the regex's first group (or its whole
/// match) is the number.
pub fn parse_figure(text: &str) -> Result<OutputFigure, String> {
    let (head, re) = text.split_once('=').ok_or_else(|| {
        format!("--figure {text}: expected NAME:higher=REGEX or NAME:lower=REGEX")
    })?;
    let (name, dir) = head.rsplit_once(':').ok_or_else(|| {
        format!(
            "--figure {text}: say which way the figure improves: {head}:higher=… (a rate) or \
             {head}:lower=… (a time)"
        )
    })?;
    let better = match dir {
        "higher" => Better::Higher,
        "lower" => Better::Lower,
        other => {
            return Err(format!(
                "--figure {text}: `{other}` is not higher or lower (which way {name} improves)"
            ))
        }
    };
    if name.is_empty() || name == WALL {
        return Err(format!(
            "--figure {text}: give the figure a name other than `{WALL}`"
        ));
    }
    let regex = Regex::new(re).map_err(|e| format!("--figure {text}: the regex: {e}"))?;
    Ok(OutputFigure {
        spec: FigureSpec {
            name: name.to_string(),
            better,
            unit: None,
        },
        regex,
    })
}

/// The number `f` reads from `output` (its last match), if any.
pub fn read_figure(f: &OutputFigure, output: &str) -> Option<f64> {
    let caps = f.regex.captures_iter(output).last()?;
    let m = caps.get(1).or_else(|| caps.get(0))?;
    m.as_str().trim().replace(',', "").parse::<f64>().ok()
}

/// Runs `cmd` once; its output goes to `log` (stdout, then `log`.err for stderr).
pub fn run_once(
    cmd: &str,
    log: &Path,
    hang_after: Duration,
    figures: &[OutputFigure],
) -> anyhow::Result<RunResult> {
    let err_path = log.with_extension("err");
    let err = std::fs::File::create(&err_path)
        .with_context(|| format!("creating {}", err_path.display()))?;
    let mut out_file =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let started = Instant::now();
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new("/bin/sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting /bin/sh -c {cmd}"))?
    };
    let stdout = child.stdout.take().expect("piped");
    let last: LastLine = Arc::new(Mutex::new(started));
    let text = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let (last, text) = (last.clone(), text.clone());
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                let _ = out_file.write_all(line.as_bytes());
                text.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_str(&line);
                *last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
                line.clear();
            }
            let _ = tx.send(());
        });
    }
    let w = watch(&mut child, started, hang_after, Some(&last), Stop::Kill)?;
    // The output's end: at once when the command's processes are gone; a daemon it left
    // holding the pipe is not waited for long.
    let _ = rx.recv_timeout(Duration::from_secs(2));
    let output = text.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut values = BTreeMap::new();
    let outcome = if let Some(sockets) = w.hung {
        Outcome::Hang {
            after_s: hang_after.as_secs_f64(),
            sockets,
        }
    } else {
        let status = w.status.expect("ended by itself");
        if !status.success() {
            Outcome::Failed {
                reason: format!("{status} (its output: {})", log.display()),
            }
        } else {
            values.insert(WALL.to_string(), w.wall.as_secs_f64());
            let missing: Vec<&str> = figures
                .iter()
                .filter_map(|f| match read_figure(f, &output) {
                    Some(v) => {
                        values.insert(f.spec.name.clone(), v);
                        None
                    }
                    None => Some(f.spec.name.as_str()),
                })
                .collect();
            if missing.is_empty() {
                Outcome::Ok
            } else {
                Outcome::Failed {
                    reason: format!(
                        "its output ({}) has no number for --figure {}",
                        log.display(),
                        missing.join(", ")
                    ),
                }
            }
        }
    };
    Ok(RunResult {
        outcome,
        wall_s: w.wall.as_secs_f64(),
        figures: values,
        why: Vec::new(),
        leftovers: w.leftovers,
    })
}
