//! A live capture on `lo` for the length of one scenario, on its own thread (the ring is
//! a blocking, mmap'ed socket), stopped by a flag.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::capture::{self, CaptureConfig, Outputs, Ring};

/// A running capture.
pub struct LiveCapture {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<anyhow::Result<capture::Outcome>>,
}

/// Whether this process may open a packet socket on `lo` (root, CAP_NET_RAW, or inside the
/// user namespace `--sandbox` creates). The error says why not.
pub fn available() -> Result<(), String> {
    Ring::open("lo", &[1], 96, 1 << 20)
        .map(drop)
        .map_err(|e| format!("{e:#}"))
}

impl LiveCapture {
    /// Starts capturing TCP on `ports` into `file`; returns once the ring is bound, so no
    /// packet of the scenario is missed.
    pub fn start(ports: &[u16], file: &Path) -> anyhow::Result<LiveCapture> {
        let cfg = CaptureConfig {
            interface: "lo".into(),
            ports: ports.to_vec(),
            snaplen: 256,
            buffer: 32 << 20,
            file: Some(file.to_path_buf()),
            analyze: false,
            duration: None,
            packets: None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let _helper = crate::bench::cpu::helper_thread();
            let opened = Ring::open(&cfg.interface, &cfg.ports, cfg.snaplen, cfg.buffer)
                .and_then(|ring| Outputs::open(&cfg, ring.link.link_type).map(|o| (ring, o)));
            match opened {
                Ok((ring, out)) => {
                    let _ = ready_tx.send(Ok(()));
                    capture::run_until(ring, out, &cfg, || flag.load(Ordering::SeqCst))
                }
                Err(e) => {
                    let msg = format!("{e:#}");
                    let _ = ready_tx.send(Err(e));
                    Err(anyhow::anyhow!(msg))
                }
            }
        });
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(LiveCapture { stop, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(anyhow::anyhow!(
                "the capture thread ended before it started"
            )),
        }
    }

    /// Stops, drains what the kernel already holds, and closes the file.
    pub fn finish(self) -> anyhow::Result<capture::Outcome> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.join() {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("the capture thread panicked")),
        }
    }
}
