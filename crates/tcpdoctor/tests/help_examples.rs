//! Every example in every `--help` runs as written, as far as a test can run it without the
//! user's servers: a newcomer copies these lines first.
//!
//! 1. The subcommands are read from `tcpdoctor --help`; each one's `--help` is searched for
//!    example lines (an indented line that starts with `tcpdoctor `), a line ending in `\`
//!    joined with the next, a trailing comment (`# …`, or `(…)` after two spaces) dropped, and
//!    the rest split as a shell would (quotes).
//! 2. Each example must parse: `tcpdoctor --check-args ARGS` (clap, every flag and value as
//!    the real command line sees them; nothing runs).
//! 3. An example of `bench` or `run` must also pass `--dry-run`, which validates what runs
//!    before any I/O — the script (a file the example names is given as a valid one, in a
//!    scratch directory) and, for `run`, the scenarios against the target and `--server`
//!    (a `wan:` path without `--server` is refused there).
//! 4. An example must not be wrapped by the help's width: the line after one that does not
//!    end in `\` is not a deeper-indented leftover.

mod common;

use std::path::PathBuf;
use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = common::tcpdoctor(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

fn subcommands() -> Vec<String> {
    let top = help(&["--help"]);
    let mut names = Vec::new();
    let mut inside = false;
    for line in top.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if line.trim().is_empty() {
                break;
            }
            if let Some(name) = line.split_whitespace().next() {
                if name != "help" {
                    names.push(name.to_string());
                }
            }
        }
    }
    names
}

/// The example command lines of one help text (rule 1), each with the line it starts on.
fn examples(help: &str) -> Vec<(String, Vec<String>)> {
    let lines: Vec<&str> = help.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        if indent == 0 || !line.trim_start().starts_with("tcpdoctor ") {
            i += 1;
            continue;
        }
        let mut text = String::new();
        let mut l = line.trim();
        loop {
            match l.strip_suffix('\\') {
                Some(head) => {
                    text.push_str(head);
                    text.push(' ');
                    i += 1;
                    l = lines.get(i).map_or("", |n| n.trim());
                }
                None => {
                    text.push_str(l);
                    break;
                }
            }
        }
        // Rule 4: a wrapped example leaves its tail on a deeper-indented line.
        if let Some(next) = lines.get(i + 1) {
            let next_indent = next.len() - next.trim_start().len();
            assert!(
                next.trim().is_empty() || next_indent <= indent,
                "an example is wrapped by the help's width: `{line}` / `{next}`"
            );
        }
        out.push((line.trim().to_string(), split(&strip_comment(&text))));
        i += 1;
    }
    out
}

fn strip_comment(text: &str) -> String {
    let mut cut = text.len();
    for marker in ["  #", "  ("] {
        if let Some(p) = text.find(marker) {
            cut = cut.min(p);
        }
    }
    text[..cut].trim().to_string()
}

/// Words as `sh` splits them: spaces, '…' and "…" quotes, \ outside single quotes.
fn split(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_example_reader_splits_joins_and_drops_comments() {
    let help = "Examples:\n  tcpdoctor run --server './srv --port 7' \\\n      --check 'p99<5ms'\n  \
                tcpdoctor analyze x.pcap        # names it\n  tcpdoctor capture -w a.pcap   (needs root)\n";
    let got = examples(help);
    let words: Vec<Vec<String>> = got.into_iter().map(|e| e.1).collect();
    assert_eq!(
        words,
        [
            vec![
                "tcpdoctor",
                "run",
                "--server",
                "./srv --port 7",
                "--check",
                "p99<5ms"
            ],
            vec!["tcpdoctor", "analyze", "x.pcap"],
            vec!["tcpdoctor", "capture", "-w", "a.pcap"],
        ]
    );
}

#[test]
fn every_example_in_every_help_runs_as_written() {
    let dir = Scratch(
        std::env::temp_dir().join(format!("tcpdoctor-help-examples-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).expect("scratch dir");
    let subs = subcommands();
    assert!(subs.len() >= 8, "{subs:?}");
    let mut checked = 0;
    let mut failures = Vec::new();
    for sub in &subs {
        for (line, words) in examples(&help(&[sub, "--help"])) {
            assert_eq!(words[0], "tcpdoctor", "{line}");
            let args = &words[1..];
            let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
                .arg("--check-args")
                .args(args)
                .current_dir(&dir.0)
                .output()
                .expect("run tcpdoctor");
            if out.status.code() != Some(0) {
                failures.push(format!(
                    "{sub} --help: `{line}` does not parse:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
                continue;
            }
            checked += 1;
            if !matches!(args[0].as_str(), "bench" | "run") {
                continue;
            }
            // Rule 3: the scripts it names, as valid scripts, then a dry run.
            for pair in args.windows(2).filter(|w| w[0] == "--script") {
                std::fs::write(
                    dir.0.join(&pair[1]),
                    "[[steps]]\nsend = \"PING\\r\\n\"\nread = { until = \"\\r\\n\" }\n",
                )
                .expect("write the example's script");
            }
            let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
                .args(args)
                .arg("--dry-run")
                .current_dir(&dir.0)
                .output()
                .expect("run tcpdoctor");
            if out.status.code() != Some(0) {
                failures.push(format!(
                    "{sub} --help: `{line}` fails its dry run:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Examples are spread over the helps (bench 4, run 3, proxy 5, …): a reader that found
    // few has stopped reading them.
    assert!(checked >= 20, "only {checked} examples found");
}
