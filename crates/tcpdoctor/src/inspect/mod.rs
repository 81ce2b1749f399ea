//! `inspect`'s shell: reads a live process's TCP sockets from the kernel into the core's
//! [`Observation`], which `tcpdoctor_core::inspect::diagnose` turns into findings.
//!
//! # Layout
//! - `proc`: /proc/PID — socket descriptors, name, namespace, CPU and syscall counters.
//! - `diag`: socket diagnostics over netlink (`tcp_info`, congestion control, buffer sizes)
//!   for a whole namespace; `tcp_info` parses the kernel's struct by offset.
//! - `netns`: a diag socket opened inside the process's network namespace.
//! - `options`: socket options through a duplicate of the descriptor (`pidfd_getfd`), and
//!   why they were refused; `dups` reads everything that way when the namespace is closed.
//! - `buffers`: fixed, autotuned or unknown buffer sizes, with the evidence.
//! - `sampler`: the loop that samples all of it over `--duration`; `track`: what is known
//!   of each process and socket between samples, and the observation it becomes.

mod buffers;
pub(crate) mod diag;
pub mod dups;
pub(crate) mod netns;
pub mod options;
pub mod proc;
mod sampler;
pub mod tcp_info;
mod track;

pub use sampler::{find_by_port, observe, say, Config};
