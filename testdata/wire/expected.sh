#!/bin/sh
# Regenerates the editcap/mergecap variants and, for every capture here, the tshark view the
# integration test (crates/tcpdoctor-core/tests/wire_real.rs) compares the reader against.
# Needs tshark/editcap/mergecap; the test itself does not. Run after capture.py/variants.py.
set -eu
cd "$(dirname "$0")"
editcap -F pcapng lo_eth.pcap lo_eth.pcapng
editcap -F pcapng lo_nano.pcap lo_nano.pcapng
editcap -F pcap -C 14 -T rawip lo_eth.pcap rawip.pcap
editcap -F pcapng -C 14 -T rawip4 lo_snap96.pcap rawip4_snap96.pcapng
mergecap -F pcapng -w merged.pcapng lo_eth.pcap any_sll.pcap
for f in *.pcap *.pcapng; do
  tshark -r "$f" -T fields -E separator=/t \
    -e frame.number -e frame.time_epoch -e frame.len -e frame.cap_len \
    -e ip.src -e ipv6.src -e tcp.srcport -e tcp.dstport -e tcp.seq_raw -e tcp.ack_raw \
    -e tcp.flags -e tcp.window_size_value -e tcp.len -e tcp.options.mss_val \
    -e tcp.options.wscale.shift -e tcp.option_kind -e tcp.options.timestamp.tsval \
    -e tcp.options.timestamp.tsecr > "$f.tshark"
done
