//! Escaping and number formatting shared by the page and its charts.
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

/// A figure with as many digits as a reader needs: 0.082, 1.25, 43.8, 5012.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        return "–".to_string();
    }
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    // 39.0 → 39, 0.080 → 0.08: digits that say nothing are dropped.
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    } else {
        s
    }
}

/// A file path, escaped, that may break after each `/` rather than mid-name.
pub fn path(p: &str) -> String {
    esc(p).replace('/', "/<wbr>")
}

/// A duration given in milliseconds, in the unit that reads best (`85 µs`, `43.8 ms`, `1.20 s`).
pub fn dur_ms(ms: f64) -> String {
    if ms > 0.0 && ms < 1.0 {
        format!("{} µs", num(ms * 1000.0))
    } else if ms >= 1000.0 {
        format!("{} s", num(ms / 1000.0))
    } else {
        format!("{} ms", num(ms))
    }
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
    fn numbers_read_well() {
        assert_eq!(num(0.0823), "0.082");
        assert_eq!(num(43.81), "43.8");
        assert_eq!(num(5012.4), "5012");
        assert_eq!(num(39.0), "39");
        assert_eq!(num(10.0), "10");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(0.0001), "0");
        assert_eq!(num(0.08), "0.08");
        assert_eq!(dur_ms(0.085), "85 µs");
        assert_eq!(dur_ms(43.8), "43.8 ms");
        assert_eq!(dur_ms(1200.0), "1.2 s");
        assert_eq!(tick_ms(0.01), "10 µs");
        assert_eq!(tick_ms(1000.0), "1 s");
    }
}
