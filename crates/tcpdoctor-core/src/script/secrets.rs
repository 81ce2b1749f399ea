//! Secret values: what tcpdoctor's own text must never show.
//!
//! The rules:
//! 1. A secret is the value of a `[vars]` entry marked `secret = true` (after `--param`
//!    replaced it), of every `{env:NAME}` the script read (the environment is where
//!    credentials come from), and of every `exec` output (a token from an outside command).
//! 2. Every text tcpdoctor makes from bytes of a conversation — an `expect` that failed, a
//!    capture that found nothing, a response that cannot be framed, a `--dry-run` line —
//!    has each occurrence of a secret's raw bytes replaced by `***` *before* it is escaped
//!    and cut to its excerpt length (so a cut cannot leave half a secret showing).
//! 3. A text already made is masked too, in its raw and its escaped spelling.
//! 4. A value computed from a secret that is no longer its raw text (`hex(sha1(…))`) is not a
//!    secret: it is what the server sees, and a login proves the secret without sending it.
//!
//! The wire bytes themselves (a capture's packets, a server's log) hold what was sent: no
//! tool can mask those without breaking them.
//!
//! Masking runs only where an error or a dry run is made, never on an exchange's path.

use std::borrow::Cow;

use super::escape_bytes;

/// What replaces a secret.
pub const MASK: &str = "***";

/// The secrets of a script, longest first (so a secret inside another is masked by the
/// longer one first), without empties or repeats.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Secrets(Vec<Vec<u8>>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} masked)", self.0.len())
    }
}

impl Secrets {
    pub(crate) fn add(&mut self, value: &[u8]) {
        if value.is_empty() || self.0.iter().any(|s| s == value) {
            return;
        }
        self.0.push(value.to_vec());
        self.0
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `bytes` with every occurrence of a secret replaced by `***`.
    pub(crate) fn mask_bytes<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        if self.0.is_empty() || !self.0.iter().any(|s| contains(bytes, s)) {
            return Cow::Borrowed(bytes);
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        'outer: while i < bytes.len() {
            for s in &self.0 {
                if bytes[i..].starts_with(s) {
                    out.extend_from_slice(MASK.as_bytes());
                    i += s.len();
                    continue 'outer;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        Cow::Owned(out)
    }

    /// An excerpt of `bytes` as the error messages show it, secrets masked first (rule 2).
    pub(crate) fn excerpt(&self, bytes: &[u8], limit: usize) -> String {
        escape_bytes(&self.mask_bytes(bytes), limit)
    }

    /// `text` with every secret masked, raw or escaped (rule 3).
    pub(crate) fn mask_text(&self, text: &str) -> String {
        if self.0.is_empty() {
            return text.to_string();
        }
        let mut out = String::from_utf8_lossy(&self.mask_bytes(text.as_bytes())).into_owned();
        for s in &self.0 {
            let escaped = escape_bytes(s, usize::MAX);
            if escaped.as_bytes() != s.as_slice() && out.contains(&escaped) {
                out = out.replace(&escaped, MASK);
            }
        }
        out
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && haystack.len() >= needle.len()
        && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(values: &[&str]) -> Secrets {
        let mut s = Secrets::default();
        for v in values {
            s.add(v.as_bytes());
        }
        s
    }

    #[test]
    fn masks_every_occurrence_longest_first() {
        let s = secrets(&["hunter2", "hunter2-extra", ""]);
        assert_eq!(
            &*s.mask_bytes(b"a hunter2 b hunter2-extra c"),
            b"a *** b *** c"
        );
        assert!(matches!(s.mask_bytes(b"nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn an_excerpt_never_shows_half_a_secret() {
        let s = secrets(&["0123456789"]);
        // Cut at 8 bytes: masked before the cut, so no "01234" is left.
        assert_eq!(s.excerpt(b"ERR 0123456789 is wrong", 8), "ERR *** …");
        assert_eq!(s.excerpt(b"ERR 0123456789", 48), "ERR ***");
    }

    #[test]
    fn masks_escaped_spellings_in_text() {
        let s = secrets(&["pa\"ss\r\n"]);
        let made = format!("received \"{}\"", escape_bytes(b"x pa\"ss\r\n y", 48));
        assert_eq!(s.mask_text(&made), "received \"x *** y\"");
        assert_eq!(s.mask_text("raw pa\"ss\r\n"), "raw ***");
    }
}
