//! IPv4 and IPv6 headers: where the TCP header starts and how long its payload is.
