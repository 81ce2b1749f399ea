//! Scripts written to hurt, through the real binary: each is refused with exit 2 and a message
//! naming what to do, or handled, never a panic or a machine out of memory.
//! - a step named with 65,536 characters: `--dry-run` cuts it (`…`) and exits 0;
//! - `--script /dev/zero` (or any file past the limit): exit 2 naming the file and the limit;
//! - `{env:NAME}` without `--allow-env NAME`: exit 2 naming every variable and the flag, before
//!   any connection (checked at a real listener); with it, read and listed by `--dry-run`.

mod common;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

use common::tcpdoctor;

struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let d =
            std::env::temp_dir().join(format!("tcpdoctor-hostile-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        Scratch(d)
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).expect("write");
        p.to_str().expect("utf-8").to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(out: &std::process::Output) -> (String, String, i32) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn a_step_named_with_65536_characters_is_cut_not_a_panic() {
    let dir = Scratch::new("name");
    let name = "n".repeat(65_536);
    let script = dir.file(
        "long.toml",
        &format!("[[steps]]\nname = \"{name}\"\nsend = \"PING\\r\\n\"\nread = {{ until = \"\\r\\n\" }}\n"),
    );
    for cmd in ["bench", "run"] {
        let (stdout, stderr, code) = text(&tcpdoctor(&[cmd, "--dry-run", "--script", &script]));
        assert_eq!(code, 0, "{cmd}: {stderr}");
        let line = stdout
            .lines()
            .find(|l| l.contains(r#""PING\r\n""#))
            .unwrap_or_else(|| panic!("{cmd}: no request line in {stdout}"));
        assert!(line.contains("nnnn…"), "{cmd}: {line}");
        assert!(
            line.chars().count() < 100,
            "{cmd}: {} characters",
            line.len()
        );
    }
}

#[test]
fn a_script_past_the_limit_is_refused_naming_the_file_and_the_limit() {
    // /dev/zero never ends: read whole it would take all memory.
    for cmd in ["bench", "run"] {
        let (_, stderr, code) = text(&tcpdoctor(&[cmd, "--dry-run", "--script", "/dev/zero"]));
        assert_eq!(code, 2, "{cmd}: {stderr}");
        assert!(
            stderr.contains("--script /dev/zero: more than 4 MiB"),
            "{cmd}: {stderr}"
        );
    }
    // A regular file one byte past the limit is refused; one at the limit is read (and is
    // then judged as TOML).
    let dir = Scratch::new("big");
    let limit = 4 << 20;
    let mut big = "# padding\n".repeat(limit / 10);
    big.push_str(&"#".repeat(limit - big.len() - 1));
    big.push('\n');
    assert_eq!(big.len(), limit);
    let at_limit = dir.file("at.toml", &big);
    let (_, stderr, code) = text(&tcpdoctor(&["bench", "--dry-run", "--script", &at_limit]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("the script sends nothing"), "{stderr}");
    big.push('#');
    let past = dir.file("past.toml", &big);
    let (_, stderr, code) = text(&tcpdoctor(&["bench", "--dry-run", "--script", &past]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("--script {past}: more than 4 MiB")),
        "{stderr}"
    );
    // Not UTF-8: named, exit 2.
    let bin = dir.0.join("bin.toml");
    std::fs::write(&bin, [b'#', 0xff, b'\n']).expect("write");
    let (_, stderr, code) = text(&tcpdoctor(&[
        "bench",
        "--dry-run",
        "--script",
        bin.to_str().expect("utf-8"),
    ]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not UTF-8"), "{stderr}");
}

const READS_ENV: &str = "[[steps]]\nsend = \"GET {env:TCPD_HOSTILE_A} {env:TCPD_HOSTILE_B}\\r\\n\"\nread = { until = \"\\r\\n\" }\n";

fn with_env(args: &[&str]) -> (String, String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .env("TCPD_HOSTILE_A", "value-a-1234")
        .env("TCPD_HOSTILE_B", "value-b-5678")
        .output()
        .expect("run tcpdoctor");
    text(&out)
}

#[test]
fn the_environment_is_read_only_when_the_command_line_names_each_variable() {
    let dir = Scratch::new("env");
    let script = dir.file("env.toml", READS_ENV);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let target = listener.local_addr().expect("addr").to_string();
    for (cmd, extra) in [
        ("bench", vec!["--requests", "5"]),
        ("bench", vec!["--dry-run"]),
        ("run", vec!["--scenarios", "direct", "--requests", "5"]),
        ("run", vec!["--dry-run"]),
    ] {
        for allow in [None, Some("TCPD_HOSTILE_A")] {
            let mut args = vec![cmd, "--target", &target, "--script", &script];
            args.extend(&extra);
            if let Some(a) = allow {
                args.extend(["--allow-env", a]);
            }
            let (stdout, stderr, code) = with_env(&args);
            assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
            // At the first refused variable's line and column.
            let want = match allow {
                None => {
                    "line 2, column 14: the script reads the environment variables \
                         `TCPD_HOSTILE_A`, `TCPD_HOSTILE_B` and they were not allowed"
                }
                Some(_) => {
                    "line 2, column 35: the script reads the environment variable \
                            `TCPD_HOSTILE_B` and it was not allowed"
                }
            };
            assert!(stderr.contains(want), "{args:?}: {stderr}");
            assert!(
                stderr.contains("--allow-env TCPD_HOSTILE_"),
                "{args:?}: {stderr}"
            );
            assert!(!stderr.contains("value-"), "{args:?}: {stderr}");
            // Refused before any connection: nothing reached the listener.
            assert_eq!(
                listener.accept().map(|_| ()).map_err(|e| e.kind()),
                Err(ErrorKind::WouldBlock),
                "{args:?} connected"
            );
        }
    }
    // Both named (comma-separated or repeated): read, listed, masked.
    for allow in [
        &["--allow-env", "TCPD_HOSTILE_A,TCPD_HOSTILE_B"][..],
        &[
            "--allow-env",
            "TCPD_HOSTILE_B",
            "--allow-env",
            "TCPD_HOSTILE_A",
        ],
    ] {
        for cmd in ["bench", "run"] {
            let mut args = vec![cmd, "--dry-run", "--script", &script];
            args.extend(allow);
            let (stdout, stderr, code) = with_env(&args);
            assert_eq!(code, 0, "{args:?}: {stderr}");
            assert!(
                stdout.contains(
                    "reads the environment (allowed by --allow-env): TCPD_HOSTILE_A, TCPD_HOSTILE_B"
                ),
                "{args:?}: {stdout}"
            );
            assert!(
                stdout.contains(r#""GET *** ***\r\n""#),
                "{args:?}: {stdout}"
            );
            assert!(!stdout.contains("value-"), "{args:?}: {stdout}");
        }
    }
}
