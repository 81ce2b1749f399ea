//! Classic pcap: both byte orders, microsecond and nanosecond timestamps.
