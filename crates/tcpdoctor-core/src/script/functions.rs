//! Template functions: the computations a login needs (`{hex(sha1(concat(challenge, " ",
//! secret)))}`), over byte strings.
//!
//! The rules every function follows:
//! 1. Every value is a byte string; text is its UTF-8 bytes. An integer is its decimal text
//!    (`len(x)` gives `"12"`), so `Content-Length: {len(body)}` and `u16be(len(body))` both read
//!    naturally; a function that wants an integer parses decimal text and says so when it is not.
//! 2. Digests and MACs give raw bytes: wrap them in `hex` or `base64` to send them as text.
//! 3. Nothing here reads a clock or an entropy source: `now_unix()` is the time the shell gave
//!    the conversation, `uuid()` and `random(n)` draw from the connection's seeded generator.
//! 4. A function whose arguments are all constant is computed once, when the script is loaded.
//! 5. Error messages never quote a value (it may be a secret): they say which function and why.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use md5::Md5;
use sha1::{Digest, Sha1};
use sha2::Sha256;

use crate::impair::SplitMix64;
use crate::Timestamp;

/// Most PBKDF2 iterations a template may ask for (a login, not a denial of service).
pub(crate) const MAX_PBKDF2_ITERATIONS: u64 = 10_000_000;
/// Longest PBKDF2 output, and most random bytes `random(n)` may make.
pub(crate) const MAX_DERIVED: u64 = 64 * 1024;
/// The largest value a function may make (`hex(hex(hex(…)))` doubles at each call).
pub(crate) const MAX_VALUE: usize = 64 * 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Func {
    Sha1,
    Sha256,
    Md5,
    HmacSha256,
    Pbkdf2Sha256,
    Hex,
    Unhex,
    Base64,
    Unbase64,
    Xor,
    Concat,
    Len,
    U8,
    U16be,
    U16le,
    U32be,
    U32le,
    U64be,
    U64le,
    Upper,
    Lower,
    NowUnix,
    Uuid,
    Random,
}

/// How many arguments a function takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arity {
    Exactly(usize),
    AtLeast(usize),
}

/// Name, function, arity, and the parameters as an error message shows them.
const TABLE: &[(&str, Func, Arity, &str)] = &[
    ("sha1", Func::Sha1, Arity::Exactly(1), "data"),
    ("sha256", Func::Sha256, Arity::Exactly(1), "data"),
    ("md5", Func::Md5, Arity::Exactly(1), "data"),
    (
        "hmac_sha256",
        Func::HmacSha256,
        Arity::Exactly(2),
        "key, message",
    ),
    (
        "pbkdf2_sha256",
        Func::Pbkdf2Sha256,
        Arity::Exactly(4),
        "password, salt, iterations, length",
    ),
    ("hex", Func::Hex, Arity::Exactly(1), "data"),
    ("unhex", Func::Unhex, Arity::Exactly(1), "hex_text"),
    ("base64", Func::Base64, Arity::Exactly(1), "data"),
    ("unbase64", Func::Unbase64, Arity::Exactly(1), "base64_text"),
    ("xor", Func::Xor, Arity::Exactly(2), "a, b"),
    ("concat", Func::Concat, Arity::AtLeast(1), "a, b, …"),
    ("len", Func::Len, Arity::Exactly(1), "data"),
    ("u8", Func::U8, Arity::Exactly(1), "integer"),
    ("u16be", Func::U16be, Arity::Exactly(1), "integer"),
    ("u16le", Func::U16le, Arity::Exactly(1), "integer"),
    ("u32be", Func::U32be, Arity::Exactly(1), "integer"),
    ("u32le", Func::U32le, Arity::Exactly(1), "integer"),
    ("u64be", Func::U64be, Arity::Exactly(1), "integer"),
    ("u64le", Func::U64le, Arity::Exactly(1), "integer"),
    ("upper", Func::Upper, Arity::Exactly(1), "text"),
    ("lower", Func::Lower, Arity::Exactly(1), "text"),
    ("now_unix", Func::NowUnix, Arity::Exactly(0), ""),
    ("uuid", Func::Uuid, Arity::Exactly(0), ""),
    ("random", Func::Random, Arity::Exactly(1), "length"),
];

/// The names of all functions, for "unknown function" messages.
pub(crate) fn names() -> String {
    TABLE
        .iter()
        .map(|(n, ..)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Func {
    pub(crate) fn from_name(name: &str) -> Option<Func> {
        TABLE.iter().find(|(n, ..)| *n == name).map(|(_, f, ..)| *f)
    }

    fn entry(self) -> &'static (&'static str, Func, Arity, &'static str) {
        // Every variant is in the table (the unit test `every_function_is_in_the_table`).
        TABLE
            .iter()
            .find(|(_, f, ..)| *f == self)
            .unwrap_or(&TABLE[0])
    }

    /// Every function, for tests that walk them all.
    #[cfg(test)]
    pub(crate) fn all() -> impl Iterator<Item = Func> {
        TABLE.iter().map(|(_, f, ..)| *f)
    }

    pub(crate) fn name(self) -> &'static str {
        self.entry().0
    }

    /// None when `n` arguments are right; else what the function takes.
    pub(crate) fn check_arity(self, n: usize) -> Option<String> {
        let (name, _, arity, params) = *self.entry();
        let ok = match arity {
            Arity::Exactly(k) => n == k,
            Arity::AtLeast(k) => n >= k,
        };
        if ok {
            return None;
        }
        let wanted = match arity {
            Arity::Exactly(0) => "no arguments".to_string(),
            Arity::Exactly(1) => "1 argument".to_string(),
            Arity::Exactly(k) => format!("{k} arguments"),
            Arity::AtLeast(k) => format!("at least {k} argument(s)"),
        };
        Some(format!(
            "`{name}` takes {wanted} ({name}({params})), not {n}"
        ))
    }

    /// True when the result depends only on the arguments (so constant arguments can be
    /// computed once at load).
    pub(crate) fn is_pure(self) -> bool {
        !matches!(self, Func::NowUnix | Func::Uuid | Func::Random)
    }
}

/// What an impure function draws on.
pub(crate) struct Sources<'r> {
    pub(crate) rng: &'r mut SplitMix64,
    /// The wall clock, as the shell gave it; None when it gave none.
    pub(crate) clock: Option<WallClock>,
}

/// Unix seconds at a timestamp of the driver's clock, and the timestamp of the request being
/// made: read only by `now_unix()` (so a request without it does no arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WallClock {
    pub(crate) unix_secs: u64,
    pub(crate) at: Timestamp,
    pub(crate) now: Timestamp,
}

impl WallClock {
    /// A clock that reads `unix_secs` now.
    #[cfg(test)]
    pub(crate) fn fixed(unix_secs: u64) -> WallClock {
        WallClock {
            unix_secs,
            at: Timestamp(0),
            now: Timestamp(0),
        }
    }

    fn unix_now(self) -> u64 {
        let elapsed = self.now.0.saturating_sub(self.at.0) / 1_000_000_000;
        self.unix_secs.saturating_add(elapsed)
    }
}

/// Applies `func` to its evaluated arguments, appending the result to `out`.
pub(crate) fn apply(
    func: Func,
    args: &[&[u8]],
    src: &mut Sources<'_>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let name = func.name();
    let arg = |i: usize| args.get(i).copied().unwrap_or(&[]);
    let size = match func {
        Func::Hex => arg(0).len().saturating_mul(2),
        Func::Base64 => arg(0).len().div_ceil(3).saturating_mul(4),
        Func::Concat => args.iter().map(|a| a.len()).fold(0, usize::saturating_add),
        _ => 0,
    };
    if size > MAX_VALUE {
        return Err(format!(
            "{name}: the value would be larger than the 64MiB limit"
        ));
    }
    let int = |i: usize| integer(name, arg(i));
    match func {
        Func::Sha1 => out.extend_from_slice(&Sha1::digest(arg(0))),
        Func::Sha256 => out.extend_from_slice(&Sha256::digest(arg(0))),
        Func::Md5 => out.extend_from_slice(&Md5::digest(arg(0))),
        Func::HmacSha256 => {
            // HMAC takes a key of any length (RFC 2104); `new_from_slice` cannot fail for it.
            let mut mac = Hmac::<Sha256>::new_from_slice(arg(0))
                .map_err(|_| format!("{name}: the key was refused"))?;
            mac.update(arg(1));
            out.extend_from_slice(&mac.finalize().into_bytes());
        }
        Func::Pbkdf2Sha256 => {
            let rounds = int(2)?;
            if rounds == 0 || rounds > MAX_PBKDF2_ITERATIONS {
                return Err(format!(
                    "{name}: iterations must be 1 to {MAX_PBKDF2_ITERATIONS}, not {rounds}"
                ));
            }
            let len = int(3)?;
            if len == 0 || len > MAX_DERIVED {
                return Err(format!(
                    "{name}: length must be 1 to {MAX_DERIVED} bytes, not {len}"
                ));
            }
            let start = out.len();
            out.resize(start + len as usize, 0);
            pbkdf2::pbkdf2::<Hmac<Sha256>>(arg(0), arg(1), rounds as u32, &mut out[start..])
                .map_err(|_| format!("{name}: the password was refused"))?;
        }
        Func::Hex => {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            out.reserve(arg(0).len() * 2);
            for &b in arg(0) {
                out.push(DIGITS[usize::from(b >> 4)]);
                out.push(DIGITS[usize::from(b & 15)]);
            }
        }
        Func::Unhex => unhex(arg(0), out)?,
        Func::Base64 => {
            let text = base64::engine::general_purpose::STANDARD.encode(arg(0));
            out.extend_from_slice(text.as_bytes());
        }
        Func::Unbase64 => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(arg(0))
                .map_err(|e| format!("{name}: not base64 ({e})"))?;
            out.extend_from_slice(&bytes);
        }
        Func::Xor => {
            let (a, b) = (arg(0), arg(1));
            if a.len() != b.len() {
                return Err(format!(
                    "{name}: the two values differ in length ({} and {} bytes)",
                    a.len(),
                    b.len()
                ));
            }
            out.extend(a.iter().zip(b).map(|(x, y)| x ^ y));
        }
        Func::Concat => {
            for a in args {
                out.extend_from_slice(a);
            }
        }
        Func::Len => push_decimal(arg(0).len() as u64, out),
        Func::U8 => out.push(fits(name, int(0)?, u8::MAX.into())? as u8),
        Func::U16be => {
            out.extend_from_slice(&(fits(name, int(0)?, u16::MAX.into())? as u16).to_be_bytes())
        }
        Func::U16le => {
            out.extend_from_slice(&(fits(name, int(0)?, u16::MAX.into())? as u16).to_le_bytes())
        }
        Func::U32be => {
            out.extend_from_slice(&(fits(name, int(0)?, u32::MAX.into())? as u32).to_be_bytes())
        }
        Func::U32le => {
            out.extend_from_slice(&(fits(name, int(0)?, u32::MAX.into())? as u32).to_le_bytes())
        }
        Func::U64be => out.extend_from_slice(&int(0)?.to_be_bytes()),
        Func::U64le => out.extend_from_slice(&int(0)?.to_le_bytes()),
        Func::Upper => out.extend(arg(0).iter().map(u8::to_ascii_uppercase)),
        Func::Lower => out.extend(arg(0).iter().map(u8::to_ascii_lowercase)),
        Func::NowUnix => match src.clock {
            Some(c) => push_decimal(c.unix_now(), out),
            None => return Err(format!("{name}: no wall clock was given to the script")),
        },
        Func::Uuid => uuid_v4(src.rng, out),
        Func::Random => {
            let n = int(0)?;
            if n == 0 || n > MAX_DERIVED {
                return Err(format!(
                    "{name}: length must be 1 to {MAX_DERIVED}, not {n}"
                ));
            }
            super::template::random_text(src.rng, n as usize, out);
        }
    }
    Ok(())
}

/// Decimal text as an integer.
fn integer(func: &str, text: &[u8]) -> Result<u64, String> {
    let digits = text.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(format!(
            "{func}: expected a decimal integer, got {} byte(s) that are not one",
            text.len()
        ));
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or_else(|| format!("{func}: the integer does not fit in 64 bits"))
    })
}

fn fits(func: &str, n: u64, max: u64) -> Result<u64, String> {
    if n > max {
        return Err(format!("{func}: {n} is larger than {max}"));
    }
    Ok(n)
}

fn unhex(text: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let digits: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if digits.len() % 2 == 1 {
        return Err("unhex: odd number of hex digits".to_string());
    }
    for (i, pair) in digits.chunks(2).enumerate() {
        let v = |c: u8| (c as char).to_digit(16);
        match (v(pair[0]), v(pair[1])) {
            (Some(hi), Some(lo)) => out.push((hi << 4 | lo) as u8),
            _ => return Err(format!("unhex: digit pair {} is not hex", i + 1)),
        }
    }
    Ok(())
}

/// A version 4 UUID (RFC 9562) from the seeded generator, as lowercase text.
fn uuid_v4(rng: &mut SplitMix64, out: &mut Vec<u8>) {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
    b[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.push(DIGITS[usize::from(byte >> 4)]);
        out.push(DIGITS[usize::from(byte & 15)]);
    }
}

/// `n` in decimal, without allocating.
pub(crate) fn push_decimal(mut n: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}
