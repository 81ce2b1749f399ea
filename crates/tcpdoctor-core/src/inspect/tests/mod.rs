//! The rules on Observations built in code: each has a case that must trigger and near misses
//! that must not.

mod builder;
mod busy_poll;
mod interval;
mod nagle;
mod pool_imbalance;
mod report;
mod schema_check;
mod server_sockets;
mod window_limited;
