//! A directory of this process's own under the temporary directory.
//!
//! 1. Made new, mode 0700, by `mkdir` itself: a name that already exists is never used (it
//!    may be another user's, holding symlinks planted where tcpdoctor writes its captures and
//!    logs, and it would be removed with them at the end); the next candidate is tried.
//! 2. Named `PREFIX.PID` (then `PREFIX.PID.1`, `.2`, …): the first is what a user sees in
//!    messages and reads back.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Rule 1 and 2: a new directory under `base`.
pub fn private_dir(base: &Path, prefix: &str) -> io::Result<PathBuf> {
    let pid = std::process::id();
    for n in 0..1000u32 {
        let name = match n {
            0 => format!("{prefix}.{pid}"),
            n => format!("{prefix}.{pid}.{n}"),
        };
        let p = base.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "every name {prefix}.{pid}.N under {} is taken",
            base.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_name_taken_already_is_never_reused() {
        let base = std::env::temp_dir().join(format!("td-scratch-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).expect("base");
        // Planted first (as another user would): the same name, holding a file.
        let planted = base.join(format!("tcpdoctor-x.{}", std::process::id()));
        std::fs::create_dir_all(&planted).expect("planted");
        std::fs::write(planted.join("client.pcapng"), "not ours").expect("plant");
        let got = private_dir(&base, "tcpdoctor-x").expect("made");
        let again = private_dir(&base, "tcpdoctor-x").expect("made");
        let mode = std::fs::metadata(&got).expect("stat").permissions().mode() & 0o777;
        let empty = std::fs::read_dir(&got).expect("read").next().is_none();
        let _ = std::fs::remove_dir_all(&base);
        assert_ne!(got, planted);
        assert_ne!(again, got);
        assert!(empty, "a new, empty directory");
        assert_eq!(mode, 0o700);
    }
}
