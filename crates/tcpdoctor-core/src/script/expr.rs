//! Computed placeholders: `{hex(sha1(concat(challenge, " ", secret)))}`, compiled once, when the
//! script is loaded, into a tree that each request walks without parsing anything.
//!
//! The grammar, inside a template's braces:
//! 1. `expr := name "(" [expr ("," expr)*] ")" | name | string | integer | env:NAME`;
//! 2. a `name` alone is a variable (`[vars]`, a capture, the loop variable) or `conn` / `i`;
//! 3. a string is quoted with `"` or `'` (whichever the TOML string around it does not use) and
//!    reads the template escapes (`\r \n \t \0 \\ \xNN`, plus `\"` and `\'`);
//! 4. an integer is decimal digits: its text, as every integer (see `functions`);
//! 5. `env:NAME` is the environment variable NAME, read by the shell when the script is loaded;
//! 6. spaces are allowed between tokens; a call whose arguments are all constant is computed
//!    at load (so `{hex(sha1("x"))}` costs what literal text costs).

use std::borrow::Cow;

use super::functions::{self, Func, Sources};
use super::template::{err, TemplateError};

/// The environment as the shell passes it in (the core reads none).
pub(crate) type EnvLookup<'e> = &'e dyn Fn(&str) -> Option<String>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expr {
    Lit(Vec<u8>),
    Var(String),
    Conn,
    Iteration,
    Call(Func, Vec<Expr>),
}

/// Everything a request's expressions may read.
pub(crate) struct Scope<'a, 'v> {
    pub(crate) lookup: &'a dyn Fn(&str) -> Option<&'v [u8]>,
    pub(crate) conn: u64,
    pub(crate) iteration: u64,
    pub(crate) sources: Sources<'a>,
}

impl Expr {
    /// Appends the value to `out`.
    pub(crate) fn eval_into<'s, 'v: 's>(
        &'s self,
        scope: &mut Scope<'_, 'v>,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        match self {
            // Up to four arguments (every function but a long `concat`) live on the stack:
            // a per-exchange HMAC allocates only its intermediate results.
            Expr::Call(func, args) if args.len() <= 4 => {
                let mut values: [Cow<'s, [u8]>; 4] = Default::default();
                for (slot, a) in values.iter_mut().zip(args) {
                    *slot = a.eval(scope)?;
                }
                let slices: [&[u8]; 4] = std::array::from_fn(|i| &*values[i]);
                functions::apply(*func, &slices[..args.len()], &mut scope.sources, out)
            }
            Expr::Call(func, args) => {
                let mut values: Vec<Cow<'s, [u8]>> = Vec::with_capacity(args.len());
                for a in args {
                    values.push(a.eval(scope)?);
                }
                let slices: Vec<&[u8]> = values.iter().map(|v| &**v).collect();
                functions::apply(*func, &slices, &mut scope.sources, out)
            }
            other => {
                out.extend_from_slice(&other.eval(scope)?);
                Ok(())
            }
        }
    }

    fn eval<'s, 'v: 's>(&'s self, scope: &mut Scope<'_, 'v>) -> Result<Cow<'s, [u8]>, String> {
        Ok(match self {
            Expr::Lit(b) => Cow::Borrowed(b),
            Expr::Var(name) => Cow::Borrowed((scope.lookup)(name).unwrap_or(&[])),
            Expr::Conn => Cow::Owned(decimal(scope.conn)),
            Expr::Iteration => Cow::Owned(decimal(scope.iteration)),
            Expr::Call(..) => {
                let mut out = Vec::new();
                self.eval_into(scope, &mut out)?;
                Cow::Owned(out)
            }
        })
    }

    /// Variables read, with the byte offset of each in the template text.
    pub(crate) fn vars(&self, offsets: &[usize], out: &mut Vec<(String, usize)>) {
        let mut at = 0;
        self.walk_vars(offsets, &mut at, out);
    }

    fn walk_vars(&self, offsets: &[usize], at: &mut usize, out: &mut Vec<(String, usize)>) {
        match self {
            Expr::Var(name) => {
                out.push((name.clone(), offsets.get(*at).copied().unwrap_or(0)));
                *at += 1;
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.walk_vars(offsets, at, out)),
            _ => {}
        }
    }
}

fn decimal(n: u64) -> Vec<u8> {
    let mut v = Vec::new();
    functions::push_decimal(n, &mut v);
    v
}

/// A parsed placeholder: the tree, the offsets of its variables in tree order, and where the
/// closing `}` is.
pub(crate) struct Parsed {
    pub(crate) expr: Expr,
    pub(crate) var_offsets: Vec<usize>,
    pub(crate) end: usize,
}

/// Parses the expression that starts at byte `pos` of `text` (just after a `{`), up to and
/// including its `}`.
pub(crate) fn parse(text: &str, pos: usize, env: EnvLookup<'_>) -> Result<Parsed, TemplateError> {
    let mut p = ExprParser {
        text,
        bytes: text.as_bytes(),
        pos,
        env,
        var_offsets: Vec::new(),
        depth: 0,
    };
    let expr = p.expr()?;
    p.skip_spaces();
    match p.peek() {
        Some(b'}') => Ok(Parsed {
            expr,
            var_offsets: p.var_offsets,
            end: p.pos + 1,
        }),
        Some(_) => Err(err(p.pos, "expected `}` or `,` here")),
        None => Err(err(pos - 1, "`{` without a closing `}`")),
    }
}

/// Deepest nesting of calls (a template is not a program).
const MAX_DEPTH: usize = 32;

struct ExprParser<'t, 'e> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
    env: EnvLookup<'e>,
    var_offsets: Vec<usize>,
    depth: usize,
}

impl<'t> ExprParser<'t, '_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(|c| c == b' ' || c == b'\t') {
            self.pos += 1;
        }
    }

    fn name(&mut self) -> &'t str {
        let text = self.text;
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        {
            self.pos += 1;
        }
        &text[start..self.pos]
    }

    fn expr(&mut self) -> Result<Expr, TemplateError> {
        self.skip_spaces();
        let start = self.pos;
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => self.string(q),
            Some(c) if c.is_ascii_digit() => {
                let digits = self.name();
                if !digits.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(err(start, format!("`{digits}` is not a number or a name")));
                }
                Ok(Expr::Lit(digits.as_bytes().to_vec()))
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let name = self.name().to_string();
                if name == "env" && self.peek() == Some(b':') {
                    self.pos += 1;
                    return self.env_var();
                }
                self.skip_spaces();
                if self.peek() == Some(b'(') {
                    self.pos += 1;
                    return self.call(&name, start);
                }
                Ok(match name.as_str() {
                    "conn" => Expr::Conn,
                    "i" => Expr::Iteration,
                    "random" | "body" => {
                        return Err(err(
                            start,
                            format!(
                                "`{name}` cannot be used inside a function call{}",
                                if name == "random" {
                                    "; write random(N)"
                                } else {
                                    ""
                                }
                            ),
                        ))
                    }
                    _ => {
                        self.var_offsets.push(start);
                        Expr::Var(name)
                    }
                })
            }
            Some(b'}') | None => Err(err(start, "expected a value here")),
            Some(_) => {
                let ch = self.text[start..].chars().next().unwrap_or('?');
                Err(err(start, format!("unexpected `{ch}` in a placeholder")))
            }
        }
    }

    fn env_var(&mut self) -> Result<Expr, TemplateError> {
        let start = self.pos;
        let name = self.name();
        if name.is_empty() {
            return Err(err(
                start,
                "`env:` needs a variable name, e.g. `{env:ZINO_SECRET}`",
            ));
        }
        match (self.env)(name) {
            Some(v) => Ok(Expr::Lit(v.into_bytes())),
            None => Err(err(
                start,
                format!("environment variable `{name}` is not set"),
            )),
        }
    }

    fn call(&mut self, name: &str, start: usize) -> Result<Expr, TemplateError> {
        let Some(func) = Func::from_name(name) else {
            return Err(err(
                start,
                format!("unknown function `{name}` (known: {})", functions::names()),
            ));
        };
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(err(start, format!("calls nest deeper than {MAX_DEPTH}")));
        }
        let mut args = Vec::new();
        self.skip_spaces();
        if self.peek() == Some(b')') {
            self.pos += 1;
        } else {
            loop {
                args.push(self.expr()?);
                self.skip_spaces();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b')') => {
                        self.pos += 1;
                        break;
                    }
                    _ => {
                        return Err(err(
                            self.pos,
                            format!("expected `,` or `)` in the arguments of `{name}`"),
                        ))
                    }
                }
            }
        }
        self.depth -= 1;
        if let Some(message) = func.check_arity(args.len()) {
            return Err(err(start, message));
        }
        fold(func, args).map_err(|m| err(start, m))
    }

    fn string(&mut self, quote: u8) -> Result<Expr, TemplateError> {
        let start = self.pos;
        self.pos += 1;
        let mut value = Vec::new();
        loop {
            match self.peek() {
                None => return Err(err(start, "a string without its closing quote")),
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(Expr::Lit(value));
                }
                Some(b'\\') if matches!(self.bytes.get(self.pos + 1), Some(b'"' | b'\'')) => {
                    value.push(self.bytes[self.pos + 1]);
                    self.pos += 2;
                }
                Some(b'\\') => {
                    let (b, used) = super::template::escape(self.bytes, self.pos)?;
                    value.push(b);
                    self.pos += used;
                }
                Some(_) => {
                    let len = self.text[self.pos..]
                        .chars()
                        .next()
                        .map_or(1, char::len_utf8);
                    value.extend_from_slice(&self.bytes[self.pos..self.pos + len]);
                    self.pos += len;
                }
            }
        }
    }
}

/// A pure call on constants becomes its value (computed once, at load).
fn fold(func: Func, args: Vec<Expr>) -> Result<Expr, String> {
    if !func.is_pure() || !args.iter().all(|a| matches!(a, Expr::Lit(_))) {
        return Ok(Expr::Call(func, args));
    }
    let slices: Vec<&[u8]> = args
        .iter()
        .map(|a| match a {
            Expr::Lit(b) => b.as_slice(),
            _ => &[],
        })
        .collect();
    let mut rng = crate::impair::SplitMix64::new(0);
    let mut sources = Sources {
        rng: &mut rng,
        clock: None,
    };
    let mut out = Vec::new();
    functions::apply(func, &slices, &mut sources, &mut out)?;
    Ok(Expr::Lit(out))
}
