//! The report of `tcpdoctor trace`: the core's summary of a trace, as text or JSON.

use std::collections::BTreeMap;

use tcpdoctor_core::syscalls::Trace;

use super::analyze::Format;

/// Renders `trace` (provisional: counts per socket and call).
pub fn render(trace: &Trace, format: Format) -> anyhow::Result<String> {
    let mut per: BTreeMap<String, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for c in &trace.calls {
        let key = match c.socket {
            Some(i) => {
                let s = &trace.sockets[i as usize];
                format!("pid {} fd {} {:?} -> {:?}", s.pid, s.fd, s.local, s.remote)
            }
            None => format!("pid {} (not a TCP socket)", c.pid),
        };
        *per.entry(key)
            .or_default()
            .entry(c.kind.name())
            .or_default() += 1;
    }
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(&per)? + "\n",
        Format::Text => {
            let mut out = format!("traced: {:?}, {} calls\n", trace.status, trace.traced_calls);
            for (k, v) in per {
                out.push_str(&format!("{k}: {v:?}\n"));
            }
            out
        }
    })
}
