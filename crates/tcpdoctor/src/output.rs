//! Writing to stdout without panicking when the reader goes away (`tcpdoctor … | head`).

use std::io::{self, Write};

/// Writes `text` to stdout; a closed pipe surfaces as an error that [`is_broken_pipe`] knows.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
