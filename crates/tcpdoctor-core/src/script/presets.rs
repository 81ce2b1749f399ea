//! Built-in scripts for the common cases, so no file is needed. Each preset is TOML text with
//! its `--param` values filled in, parsed like any script (`Script::preset_source` shows it).
//!
//! | preset | what it sends | params (default) |
//! |---|---|---|
//! | `echo` | a length-prefixed random payload; reads the same framing back | `size` (64), `prefix` (u32be) |
//! | `echo-line` | a random line; reads one line back | `size` (64), `terminator` (`\n`) |
//! | `resp` | Redis `PING`, `GET key` (after one `SET`), or `SET key value` | `command` (ping), `key` (tcpdoctor), `size` (64) |
//! | `http1` | `GET path` (or `HEAD`), keep-alive | `path` (/), `host` (localhost), `method` (GET) |
//! | `memcache` | `get key` (after one `set`) or `set key` | `command` (get), `key` (tcpdoctor), `size` (64) |
//! | `line` | any line protocol: a request line, a response ending with the terminator | `request` (PING), `terminator` (`\r\n`), `until_line`, `expect` |

use super::ScriptError;
use crate::units::parse_size;

const PRESETS: &[(&str, &[&str])] = &[
    ("echo", &["size", "prefix"]),
    ("echo-line", &["size", "terminator"]),
    ("resp", &["command", "key", "size"]),
    ("http1", &["path", "host", "method"]),
    ("memcache", &["command", "key", "size"]),
    ("line", &["request", "terminator", "until_line", "expect"]),
];

/// Names of the built-in presets.
pub fn preset_names() -> &'static [&'static str] {
    &["echo", "echo-line", "resp", "http1", "memcache", "line"]
}

fn fail(preset: &str, message: String) -> ScriptError {
    ScriptError::new(None, None, format!("preset `{preset}`: {message}"))
}

/// A TOML basic string whose content is `text` exactly (templates then read its escapes).
fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text to appear literally inside a template: braces doubled.
fn literal(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
}

struct Params<'a> {
    preset: &'a str,
    given: &'a [(String, String)],
}

impl Params<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.given
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn text<'d>(&'d self, key: &str, default: &'d str) -> &'d str {
        self.get(key).unwrap_or(default)
    }

    fn size(&self, key: &str, default: u64) -> Result<u64, ScriptError> {
        let Some(text) = self.get(key) else {
            return Ok(default);
        };
        let n = parse_size(text).map_err(|e| fail(self.preset, format!("`{key}`: {e}")))?;
        if n == 0 || n > super::template::MAX_RANDOM {
            return Err(fail(
                self.preset,
                format!("`{key}` must be from 1 byte to 64MiB, not {text}"),
            ));
        }
        Ok(n)
    }

    fn choice<'c>(&self, key: &str, choices: &[&'c str]) -> Result<&'c str, ScriptError> {
        let Some(text) = self.get(key) else {
            return Ok(choices[0]);
        };
        choices
            .iter()
            .find(|c| c.eq_ignore_ascii_case(text))
            .copied()
            .ok_or_else(|| {
                fail(
                    self.preset,
                    format!(
                        "`{key}` must be one of {}, not `{text}`",
                        choices.join(", ")
                    ),
                )
            })
    }

    /// A key that goes literally into a length-counted protocol: no placeholders.
    fn key(&self) -> Result<String, ScriptError> {
        let key = self.text("key", "tcpdoctor");
        if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(fail(
                self.preset,
                format!(
                    "`key` must be non-empty, without spaces or control characters, not `{key}`"
                ),
            ));
        }
        Ok(key.to_string())
    }
}

/// The TOML source of preset `name` with `params` applied.
pub(crate) fn source(name: &str, params: &[(String, String)]) -> Result<String, ScriptError> {
    let Some((name, valid)) = PRESETS.iter().find(|(n, _)| *n == name) else {
        return Err(ScriptError::new(
            None,
            None,
            format!(
                "unknown preset `{name}` (expected one of: {})",
                preset_names().join(", ")
            ),
        ));
    };
    for (i, (key, _)) in params.iter().enumerate() {
        if !valid.contains(&key.as_str()) {
            return Err(fail(
                name,
                format!("unknown parameter `{key}` (valid: {})", valid.join(", ")),
            ));
        }
        if params[..i].iter().any(|(k, _)| k == key) {
            return Err(fail(name, format!("parameter `{key}` given twice")));
        }
    }
    let p = Params {
        preset: name,
        given: params,
    };
    let head = format!("name = {}\n", quote(name));
    Ok(head
        + &match *name {
            "echo" => echo(&p)?,
            "echo-line" => echo_line(&p)?,
            "resp" => resp(&p)?,
            "http1" => http1(&p)?,
            "memcache" => memcache(&p)?,
            _ => line(&p)?,
        })
}

fn echo(p: &Params<'_>) -> Result<String, ScriptError> {
    let size = p.size("size", 64)?;
    let prefix = p.choice("prefix", &["u32be", "u32le", "u16be", "u16le", "u8"])?;
    Ok(format!(
        "[[steps]]\nname = \"echo\"\nsend = \"{{random:{size}}}\"\nsend_prefix = \"{prefix}\"\n\
         read = {{ length_prefix = \"{prefix}\" }}\n"
    ))
}

fn echo_line(p: &Params<'_>) -> Result<String, ScriptError> {
    let size = p.size("size", 64)?;
    let term = p.text("terminator", "\\n");
    Ok(format!(
        "[[steps]]\nname = \"echo\"\nsend = {}\nread = {{ until = {} }}\n",
        quote(&format!("{{random:{size}}}{}", literal(term))),
        quote(term)
    ))
}

fn resp_command(words: &[(&str, usize)]) -> String {
    let mut out = format!("*{}\\r\\n", words.len());
    for (word, len) in words {
        out.push_str(&format!("${len}\\r\\n{word}\\r\\n"));
    }
    out
}

fn resp(p: &Params<'_>) -> Result<String, ScriptError> {
    let command = p.choice("command", &["ping", "get", "set"])?;
    let key = p.key()?;
    let size = p.size("size", 64)? as usize;
    let k = literal(&key);
    let value = format!("{{random:{size}}}");
    let set = resp_command(&[("SET", 3), (&k, key.len()), (&value, size)]);
    let step = |name: &str, send: &str| {
        format!(
            "name = \"{name}\"\nsend = {}\nread = \"resp\"\nexpect = '^[^-]'\n",
            quote(send)
        )
    };
    Ok(match command {
        "ping" => format!("[[steps]]\n{}", step("PING", &resp_command(&[("PING", 4)]))),
        "set" => format!("[[steps]]\n{}", step("SET", &set)),
        _ => format!(
            "[[setup]]\n{}\n[[steps]]\n{}",
            step("SET", &set),
            step("GET", &resp_command(&[("GET", 3), (&k, key.len())]))
        ),
    })
}

fn http1(p: &Params<'_>) -> Result<String, ScriptError> {
    let method = p.choice("method", &["GET", "HEAD"])?;
    let path = p.text("path", "/");
    let host = p.text("host", "localhost");
    for (key, value) in [("path", path), ("host", host)] {
        if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(fail(
                p.preset,
                format!("`{key}` must be non-empty, without spaces or control characters"),
            ));
        }
    }
    let send = format!(
        "{method} {} HTTP/1.1\\r\\nHost: {}\\r\\n\\r\\n",
        literal(path),
        literal(host)
    );
    Ok(format!(
        "[[steps]]\nname = \"{method}\"\nsend = {}\nread = \"http\"\nexpect = '^HTTP/1\\.[01] [23]'\n",
        quote(&send)
    ))
}

fn memcache(p: &Params<'_>) -> Result<String, ScriptError> {
    let command = p.choice("command", &["get", "set"])?;
    let key = literal(&p.key()?);
    let size = p.size("size", 64)?;
    let set = format!(
        "[[{{section}}]]\nname = \"set\"\nsend = {}\nread = {{ until = \"\\r\\n\" }}\nexpect = '^STORED'\n",
        quote(&format!("set {key} 0 0 {size}\\r\\n{{random:{size}}}\\r\\n"))
    );
    Ok(match command {
        "set" => set.replace("{section}", "steps"),
        _ => format!(
            "{}\n[[steps]]\nname = \"get\"\nsend = {}\nread = {{ until_line = '^END\\r?$' }}\nexpect = '^VALUE '\n",
            set.replace("{section}", "setup"),
            quote(&format!("get {key}\\r\\n"))
        ),
    })
}

fn line(p: &Params<'_>) -> Result<String, ScriptError> {
    let request = p.text("request", "PING");
    let term = p.text("terminator", "\\r\\n");
    let mut out = format!("[[steps]]\nsend = {}\n", quote(&format!("{request}{term}")));
    match p.get("until_line") {
        Some(re) => out.push_str(&format!("read = {{ until_line = {} }}\n", quote(re))),
        None => out.push_str(&format!("read = {{ until = {} }}\n", quote(term))),
    }
    if let Some(re) = p.get("expect") {
        out.push_str(&format!("expect = {}\n", quote(re)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::script::{Conversation, Script};
    use crate::Timestamp;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The requests a preset makes in its first `n` exchanges, each answered by `answer`.
    fn requests(name: &str, given: &[(&str, &str)], answers: &[&[u8]]) -> Vec<Vec<u8>> {
        let script = Script::preset(name, &params(given)).unwrap_or_else(|e| panic!("{e}"));
        let mut conv = Conversation::new(Arc::new(script), 0, 5);
        let mut out = Vec::new();
        for answer in answers {
            let req = conv.next_request(Timestamp::ZERO).expect("a request");
            out.push(req.bytes);
            let done = conv.on_bytes(answer, Timestamp::ZERO).unwrap();
            assert_eq!(
                done.len(),
                1,
                "{name}: {:?}",
                String::from_utf8_lossy(answer)
            );
            assert_eq!(done[0].failed_assertion, None, "{name}");
        }
        out
    }

    #[test]
    fn presets_speak_their_protocols() {
        let reqs = requests("resp", &[], &[b"+PONG\r\n"]);
        assert_eq!(reqs[0], b"*1\r\n$4\r\nPING\r\n");

        let reqs = requests(
            "resp",
            &[("command", "GET"), ("key", "k1"), ("size", "3")],
            &[b"+OK\r\n", b"$3\r\nabc\r\n"],
        );
        let head = b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$3\r\n";
        assert!(reqs[0].starts_with(head) && reqs[0].ends_with(b"\r\n"));
        assert_eq!(reqs[0].len(), head.len() + 3 + 2);
        assert_eq!(reqs[1], b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n");

        let reqs = requests(
            "http1",
            &[("path", "/a{b}"), ("host", "h")],
            &[b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"],
        );
        assert_eq!(reqs[0], b"GET /a{b} HTTP/1.1\r\nHost: h\r\n\r\n");

        let reqs = requests(
            "memcache",
            &[("size", "4")],
            &[b"STORED\r\n", b"VALUE tcpdoctor 0 4\r\nEND!\r\nEND\r\n"],
        );
        assert!(reqs[0].starts_with(b"set tcpdoctor 0 0 4\r\n") && reqs[0].len() == 21 + 6);
        assert_eq!(reqs[1], b"get tcpdoctor\r\n");

        let reqs = requests(
            "echo-line",
            &[("size", "10"), ("terminator", "\\r\\n")],
            &[b"x\r\n"],
        );
        assert!(reqs[0].len() == 12 && reqs[0].ends_with(b"\r\n"));

        let reqs = requests(
            "line",
            &[("request", "STATUS {i}"), ("until_line", "^\\.\\r?$")],
            &[b"200 ok\r\nup\r\n.\r\n", b".\r\n"],
        );
        assert_eq!(reqs, [b"STATUS 0\r\n".to_vec(), b"STATUS 1\r\n".to_vec()]);

        let reqs = requests(
            "echo",
            &[("size", "2"), ("prefix", "u16le")],
            &[b"\x02\x00ab"],
        );
        assert_eq!(reqs[0][..2], [2, 0]);
    }

    #[test]
    fn bad_params_name_the_key_and_the_choices() {
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: &[Case<'_>] = &[
            ("nope", &[], "unknown preset `nope` (expected one of: echo, echo-line, resp, http1, memcache, line)"),
            ("resp", &[("path", "/")], "preset `resp`: unknown parameter `path` (valid: command, key, size)"),
            ("resp", &[("command", "del")], "preset `resp`: `command` must be one of ping, get, set, not `del`"),
            ("echo", &[("size", "0")], "preset `echo`: `size` must be from 1 byte to 64MiB, not 0"),
            ("echo", &[("size", "1k"), ("size", "2k")], "preset `echo`: parameter `size` given twice"),
            ("echo", &[("size", "300"), ("prefix", "u8")], "preset `echo`: a request of at least 300 bytes does not fit a u8 length (at most 255)"),
            ("http1", &[("path", "/a b")], "preset `http1`: `path` must be non-empty, without spaces or control characters"),
            ("memcache", &[("key", "")], "preset `memcache`: `key` must be non-empty, without spaces or control characters, not ``"),
            ("line", &[("until_line", "(")], "preset `line`: bad regex in `until_line`: unclosed group"),
        ];
        for (name, given, want) in cases {
            let e = Script::preset(name, &params(given)).unwrap_err();
            assert_eq!(e.to_string(), *want);
            assert_eq!(e.line(), None);
        }
    }
}
