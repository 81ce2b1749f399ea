//! `analyze --ends`: read the two files again and hand their TCP packets to the core's
//! comparison of two ends of one path.

use std::fs::File;
use std::path::Path;

use anyhow::Context;
use tcpdoctor_core::ends::{compare, EndCapture, EndsReport};
use tcpdoctor_core::wire::{decode_tcp, CaptureReader};

use crate::capture_file::Input;

/// Compares `first` and `second` as two ends of one path.
pub(crate) fn compare_ends(first: &Path, second: &Path) -> anyhow::Result<EndsReport> {
    Ok(compare(read(first)?, read(second)?))
}

fn read(path: &Path) -> anyhow::Result<EndCapture> {
    let name = path.display().to_string();
    let mut end = EndCapture::new(&name);
    let file = File::open(path).with_context(|| format!("comparing the ends: {name}"))?;
    let input = Input::new(file).with_context(|| format!("comparing the ends: {name}"))?;
    let mut reader = CaptureReader::with_buffer_size(input, 4 << 20)
        .with_context(|| format!("comparing the ends: {name}"))?;
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            // The analysis pass already warned; the frames before the cut were read.
            Err(e) if e.is_cut_short() => break,
            Err(e) => return Err(e).with_context(|| format!("comparing the ends: {name}")),
        };
        if let Some(seg) = decode_tcp(frame.link, frame.data, frame.orig_len).tcp() {
            end.on_segment(frame.number, frame.ts, seg);
        }
    }
    Ok(end)
}
