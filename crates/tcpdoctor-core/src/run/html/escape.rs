//! Escaping shared by the page and its charts; numbers print as everywhere else
//! ([`crate::numfmt`]).
//!
//! Every string that comes from the model goes through [`esc`]: scenario names, server command
//! lines, verdicts and file names are written by users or by the traffic, and the page must
//! show them as text, never run them as markup.

/// `s` as HTML text or attribute value (also valid inside SVG).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub use crate::numfmt::{dur_ms, num};

/// A file path, escaped, that may break after each `/` rather than mid-name.
pub fn path(p: &str) -> String {
    esc(p).replace('/', "/<wbr>")
}

/// A log-axis tick label: 10 µs, 100 µs, 1 ms, 10 ms, 100 ms, 1 s, 10 s.
pub fn tick_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.0} µs", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.0} s", ms / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_becomes_text() {
        assert_eq!(
            esc(r#"<script>alert("x&'y")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;&#39;y&quot;)&lt;/script&gt;"
        );
    }

    #[test]
    fn ticks_read_well() {
        assert_eq!(tick_ms(0.01), "10 µs");
        assert_eq!(tick_ms(1000.0), "1 s");
    }
}
