#!/bin/sh
# Writes, for every capture here, tshark's view that crates/tcpdoctor-core/tests/wire_links.rs
# compares the decoder against: per frame its number, the protocols tshark dissected, for TCP
# the ports, raw sequence number and payload length, and for 802.11 the frame's type/subtype,
# its Protected bit and its A-MSDU bit. Needs tshark; the test does not.
set -eu
cd "$(dirname "$0")"
for f in *.pcap; do
  tshark -r "$f" -T fields -E separator=/t \
    -e frame.number -e frame.protocols -e tcp.srcport -e tcp.dstport -e tcp.seq_raw \
    -e tcp.len -e wlan.fc.type_subtype -e wlan.fc.protected -e wlan.qos.amsdupresent \
    > "$f.tshark"
done
