//! Secret vars, `exec` and dry runs in the core: parsing (errors with line and column), the
//! masking of what a conversation reports, the model of an `exec`, what a dry run can know.

use std::sync::Arc;

use super::*;

fn t(ns: u64) -> Timestamp {
    Timestamp(ns)
}

fn env_table(name: &str) -> Option<String> {
    (name == "TOKEN").then(|| "tok-from-env".to_string())
}

fn parse(src: &str, vars: &[(&str, &str)]) -> Result<Script, ScriptError> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Script::parse_with(
        src,
        &Inputs {
            vars: &vars,
            env: Some(&env_table),
            allow_env: &["TOKEN".to_string(), "UNSET".to_string()],
        },
    )
}

fn err(src: &str) -> ScriptError {
    parse(src, &[]).expect_err("an invalid script")
}

const ECHOED: &str = r#"
[vars]
pw = { value = "file-pw", secret = true }
user = "bench"

[[steps]]
send = "LOGIN {user} {pw} {env:TOKEN}\r\n"
read = { until = "\r\n" }
expect = '^200 '
"#;

#[test]
fn a_failed_expect_that_echoes_secrets_masks_them() {
    let script = Arc::new(parse(ECHOED, &[("pw", "param-pw-123")]).expect("valid"));
    assert!(script.is_secret("pw") && !script.is_secret("user"));
    let mut c = Conversation::new(script, 0, 1);
    let req = c.next_request(t(0)).expect("a request");
    assert_eq!(req.bytes, b"LOGIN bench param-pw-123 tok-from-env\r\n");
    let echo = b"500 bad: LOGIN bench param-pw-123 tok-from-env\r\n";
    let done = c.on_bytes(echo, t(1)).expect("framed");
    let failed = done[0].failed_assertion.as_deref().expect("failed");
    assert!(failed.contains("LOGIN bench *** ***"), "{failed}");
    assert!(
        !failed.contains("param-pw") && !failed.contains("tok-from"),
        "{failed}"
    );
}

#[test]
fn bytes_nobody_asked_for_are_masked_in_the_error() {
    let script = Arc::new(parse(ECHOED, &[]).expect("valid"));
    let mut c = Conversation::new(script, 0, 1);
    c.next_request(t(0)).expect("a request");
    let e = c
        .on_bytes(b"200 ok\r\nfile-pw leaked\r\n", t(1))
        .expect_err("unexpected bytes");
    assert_eq!(e.excerpt, "*** leaked\\r\\n");
    // A secret cut by the excerpt's length is masked before the cut.
    let mut long = b"200 ok\r\n".to_vec();
    long.extend(std::iter::repeat_n(b'.', 40));
    long.extend(b"file-pw");
    let script = Arc::new(parse(ECHOED, &[]).expect("valid"));
    let mut c = Conversation::new(script, 0, 1);
    c.next_request(t(0)).expect("a request");
    let e = c.on_bytes(&long, t(1)).expect_err("unexpected bytes");
    assert!(!e.excerpt.contains("file"), "{}", e.excerpt);
}

#[test]
fn debug_shows_names_not_values() {
    let script = parse(ECHOED, &[("pw", "param-pw-123")]).expect("valid");
    let shown = format!("{script:?}");
    assert!(
        shown.contains("pw") && !shown.contains("param-pw-123"),
        "{shown}"
    );
    assert_eq!(script.mask("x param-pw-123 y"), "x *** y");
}

#[test]
fn bad_secret_vars_name_line_and_column() {
    let cases: &[(&str, (usize, usize), &str)] = &[
        (
            "[vars]\npw = { value = \"x\", secret = \"yes\" }\n",
            (2, 30),
            "`secret` must be true or false",
        ),
        ("[vars]\npw = { secret = true }\n", (2, 6), "needs `value`"),
        (
            "[vars]\npw = { value = \"x\", hidden = true }\n",
            (2, 21),
            "unknown key `hidden`",
        ),
        (
            "[vars]\npw = { value = { a = 1 } }\n",
            (2, 16),
            "must be a string, an integer or an array",
        ),
    ];
    for (vars, (line, column), needle) in cases {
        let src = format!("{vars}[[steps]]\nsend = \"x\"\nread = {{ until = \"\\n\" }}\n");
        let e = err(&src);
        assert_eq!((e.line(), e.column()), (Some(*line), Some(*column)), "{e}");
        assert!(e.message().contains(needle), "{e}");
    }
}

const STEP: &str = "send = \"GET {token}\\n\"\nread = { until = \"\\n\" }\n";

#[test]
fn exec_is_refused_where_requests_repeat_and_checked_in_setup() {
    let cases: &[(String, (usize, usize), &str)] = &[
        (
            "[[steps]]\nexec = { name = \"t\", command = [\"x\"] }\n".into(),
            (2, 1),
            "not allowed in [[steps]]",
        ),
        (
            "[vars]\nl = [\"a\"]\n[[setup]]\nfor_each = \"x in l\"\n[[setup.do]]\nexec = { name = \"t\", command = [\"x\"] }\n".into(),
            (6, 1),
            "not allowed in [[setup.do]]",
        ),
        (
            "[greeting]\nread = { until = \"\\n\" }\ncapture = { c = '(.*)' }\n[[setup]]\nexec = { name = \"token\", command = [\"x\", \"{c}\"] }\n".into(),
            (5, 44),
            "cannot use the capture `c`",
        ),
        (
            "[[setup]]\nexec = { name = \"token\", command = [] }\n".into(),
            (2, 36),
            "must not be empty",
        ),
        (
            "[[setup]]\nexec = { name = \"token\", command = \"x\" }\n".into(),
            (2, 36),
            "must be an array of strings",
        ),
        (
            "[[setup]]\nexec = { name = \"token\", command = [\"x\"], timeout = \"0s\" }\n".into(),
            (2, 53),
            "more than 0",
        ),
        (
            "[[setup]]\nexec = { name = \"token\", command = [\"x\"] }\nsend = \"y\"\n".into(),
            (3, 1),
            "unknown key `send`",
        ),
        (
            "[vars]\ntoken = \"a\"\n[[setup]]\nexec = { name = \"token\", command = [\"x\"] }\n".into(),
            (4, 17),
            "already defined",
        ),
    ];
    for (src, (line, column), needle) in cases {
        let src = format!("{src}[[steps]]\nsend = \"x\"\nread = {{ until = \"\\n\" }}\n");
        let e = err(&src);
        assert_eq!(
            (e.line(), e.column()),
            (Some(*line), Some(*column)),
            "{src}\n{e}"
        );
        assert!(e.message().contains(needle), "{e}");
    }
}

#[test]
fn an_exec_value_is_rendered_into_requests_and_masked() {
    let src = format!(
        "[vars]\nuser = \"bench\"\n[[setup]]\nexec = {{ name = \"token\", command = [\"get-token\", \"--user={{user}}\"], timeout = \"2s\" }}\n[[steps]]\n{STEP}expect = '^ok'\n"
    );
    let mut script = parse(&src, &[]).expect("valid");
    assert_eq!(script.execs().len(), 1);
    let e = &script.execs()[0];
    assert_eq!((e.name(), e.line()), ("token", 4));
    assert_eq!(e.timeout(), std::time::Duration::from_secs(2));
    assert_eq!(e.written(), ["get-token", "--user={user}"]);
    assert_eq!(
        script.exec_command(0),
        [b"get-token".to_vec(), b"--user=bench".to_vec()]
    );
    script.set_exec_value(0, b"T0K3N".to_vec());
    let mut c = Conversation::new(Arc::new(script), 0, 1);
    assert_eq!(c.next_request(t(0)).expect("request").bytes, b"GET T0K3N\n");
    let done = c.on_bytes(b"denied T0K3N\n", t(1)).expect("framed");
    let failed = done[0].failed_assertion.as_deref().expect("failed");
    assert!(failed.contains("denied ***") && !failed.contains("T0K3N"));
}

#[test]
fn dry_run_of_a_challenge_login_names_what_it_cannot_know() {
    let src = r#"
[vars]
user = "bench"
secret = { value = "s3cret", secret = true }
[greeting]
read = { until = "\r\n" }
capture = { challenge = '^200 (\S+) ' }
[[setup]]
send = 'USER {user} {hex(sha1(concat(challenge, " ", secret)))} {secret}\r\n'
read = { until = "\r\n" }
[[setup]]
send = "CASEIDS\r\n"
read = { until_line = '^\.\r?$' }
capture = { ids = { each_line = '^(\d+)\r?$' } }
[[steps]]
for_each = "id in ids"
[[steps.do]]
send = "GETATTRS {id} {conn}/{i}\r\n"
read = { until = "\r\n" }
"#;
    let d = parse(src, &[]).expect("valid").dry_run(1, None);
    assert_eq!(d.greeting, Some(vec!["challenge".to_string()]));
    let shown: Vec<(&str, &str, bool)> = d
        .requests
        .iter()
        .map(|r| (r.part, r.shown.as_str(), r.exact))
        .collect();
    assert_eq!(
        shown,
        [
            (
                "setup",
                r#"USER bench {hex(sha1(concat(challenge, \" \", secret)))} ***\r\n"#,
                false
            ),
            ("setup", r"CASEIDS\r\n", true),
            ("steps", r"GETATTRS {id} 0/0\r\n", false),
        ]
    );
    let unknowns: Vec<(&str, &str)> = d
        .unknowns
        .iter()
        .map(|u| (u.name.as_str(), u.from.as_str()))
        .collect();
    assert_eq!(
        unknowns,
        [
            ("challenge", "from the greeting"),
            ("id", "each element of `ids`")
        ]
    );
    let text = d.render_text();
    assert!(text.contains("challenge = <from the greeting>"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[test]
fn dry_run_computes_what_it_can() {
    let src = r#"
[vars]
names = ["first", "second"]
[[setup]]
send = "T {now_unix()}\n"
read = { until = "\n" }
[[setup]]
exec = { name = "token", command = ["get-token"] }
[[steps]]
for_each = "n in names"
[[steps.do]]
send = "GET {n} {token}\n"
send_prefix = "u16be"
read = { until = "\n" }
"#;
    let script = parse(src, &[]).expect("valid");
    // Without a clock, now_unix() cannot be computed: said, not hidden.
    let d = script.dry_run(1, None);
    assert!(!d.requests[0].exact);
    assert!(d.requests[0]
        .note
        .as_deref()
        .is_some_and(|n| n.contains("no wall clock")));
    let d = script.dry_run(1, Some(1_700_000_000));
    assert_eq!(d.requests[0].shown, r"T 1700000000\n");
    assert!(d.requests[0].exact);
    // The first element of a list written in [vars]; the exec's output is unknown.
    assert_eq!(d.requests[1].shown, r"{u16be length}GET first {token}\n");
    assert!(d.requests[1]
        .note
        .as_deref()
        .is_some_and(|n| n.contains("first of 2")));
    assert_eq!(d.unknowns[0].name, "token");
    assert!(d.unknowns[0].from.contains("get-token"), "{:?}", d.unknowns);
    // Once the shell passed the output in, the request is exact, length field included.
    let mut script = script;
    script.set_exec_value(0, b"tk".to_vec());
    let d = script.dry_run(1, Some(1_700_000_000));
    assert_eq!(d.requests[1].shown, r"\x00\rGET first ***\n");
    assert!(d.requests[1].exact);
}

#[test]
fn a_step_named_after_a_secret_is_masked() {
    let src = "[[steps]]\nsend = \"{env:TOKEN} GET\\n\"\nread = { until = \"\\n\" }\n";
    let script = parse(src, &[]).expect("valid");
    assert_eq!(script.step_names(), ["***"]);
}

#[test]
fn the_environment_is_read_only_where_the_command_line_allows_it() {
    let src = "[[steps]]\nsend = \"{env:TOKEN} {env:HOME} {hex(env:PATH)} {env:HOME}\\n\"\nread = { until = \"\\n\" }\n";
    // Nothing allowed: every variable read is named, at the first one's line, with the fix.
    let e = Script::parse(src).expect_err("nothing allowed");
    assert_eq!(
        e.to_string(),
        "line 2, column 10: the script reads the environment variables `TOKEN`, `HOME`, `PATH` \
         and they were not allowed: a script sends what it reads to its target, so name each \
         one it may read with --allow-env TOKEN,HOME,PATH"
    );
    // Allowing some names the rest; a variable that is set but not allowed is refused.
    let e = parse(src, &[]).expect_err("HOME and PATH not allowed");
    assert!(
        e.message()
            .contains("variables `HOME`, `PATH` and they were")
            && !e.message().contains("TOKEN"),
        "{e}"
    );
    // Allowed: read, listed, masked in a dry run.
    let src = "[[steps]]\nsend = \"GET {env:TOKEN}\\n\"\nread = { until = \"\\n\" }\n";
    let script = parse(src, &[]).expect("TOKEN is allowed");
    assert_eq!(script.env_read(), ["TOKEN"]);
    let d = script.dry_run(1, None);
    assert_eq!(d.env, ["TOKEN"]);
    let text = d.render_text();
    assert!(
        text.contains("reads the environment (allowed by --allow-env): TOKEN"),
        "{text}"
    );
    assert!(!text.contains("tok-from-env"), "{text}");
    // A script that reads nothing lists nothing.
    let plain = parse(
        "[[steps]]\nsend = \"GET\\n\"\nread = { until = \"\\n\" }\n",
        &[],
    )
    .expect("valid");
    assert!(plain.env_read().is_empty());
    assert!(!plain.dry_run(1, None).render_text().contains("environment"));
    // Allowed but not set is still an error.
    let unset = "[[steps]]\nsend = \"{env:UNSET}\\n\"\nread = { until = \"\\n\" }\n";
    let e = parse(unset, &[]).expect_err("allowed, not set");
    assert!(e.message().contains("`UNSET` is not set"), "{e}");
}

#[test]
fn a_step_named_with_65536_characters_is_cut_in_the_dry_run() {
    let name = "s".repeat(65_536);
    let src =
        format!("[[steps]]\nname = \"{name}\"\nsend = \"GET\\n\"\nread = {{ until = \"\\n\" }}\n");
    let script = Script::parse(&src).expect("valid");
    let text = script.dry_run(1, None).render_text();
    let line = text
        .lines()
        .find(|l| l.contains("\"GET\\n\""))
        .expect("the request");
    assert!(line.chars().count() < 80, "{line}");
    assert!(line.contains(&format!("{}…", "s".repeat(47))), "{line}");
}
