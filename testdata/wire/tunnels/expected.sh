#!/bin/sh
# Writes, for every capture here, tshark's view that crates/tcpdoctor-core/tests/wire_tunnels.rs
# compares the decoder against: per frame its number, the protocols tshark dissected, and for
# TCP the ports, raw sequence number and payload length of the (inner) segment. Needs tshark;
# the test does not.
set -eu
cd "$(dirname "$0")"
for f in *.pcap; do
  tshark -r "$f" -T fields -E separator=/t \
    -e frame.number -e frame.protocols -e tcp.srcport -e tcp.dstport -e tcp.seq_raw \
    -e tcp.len > "$f.tshark"
done
