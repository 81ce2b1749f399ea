//! Claims a finding makes about particular frames, stated so that they can be re-checked from
//! the packets alone.
//!
//! A finding's verdict rests on facts about a few frames: this segment was small, that ACK was
//! the first to acknowledge it, the data left right after. The detectors write those facts
//! down here, with every frame they depend on (including the frames an RTT or an MSS was
//! taken from), and the evidence audit re-decodes the frames with its own decoder and checks
//! each claim with its own arithmetic. A claim that does not hold withdraws the finding.

use serde::Serialize;

/// One checkable claim.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "claim", rename_all = "snake_case")]
pub enum Claim {
    /// Nagle's algorithm held the sender's data from `before` to `after`, until `ack`.
    NagleHold(NagleHold),
    /// A request waited for the previous response, and its exchange took a whole round trip.
    SequentialExchange(SequentialExchange),
    /// A flight of small segments spent the congestion window; the rest waited for an ACK.
    WindowWait(WindowWait),
}

/// What released a Nagle hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleasedBy {
    /// The receiver's delayed-ACK timer: the ACK was held 25–550 ms (RFC 1122 allows 500).
    DelayedAck,
    /// An ACK the receiver sent at once: the hold cost about one round trip.
    ImmediateAck,
}

/// The frames and figures of one Nagle hold.
///
/// What must hold (the audit checks each): `before` and `after` are data from `sender` to
/// `receiver` with nothing from the sender between them; `ack` is a pure ACK from the receiver
/// (no payload, SYN, FIN or RST) that acknowledges everything up to the end of `before`, and no
/// earlier segment from the receiver after `oldest` did; some segment from `oldest` to
/// `before` is smaller than `full_segment`, and `after` is too; `full_segment` is what the SYNs
/// in `syns` announced (less 12 bytes with timestamps) when they are given; the ACK's hold and
/// the release fit `released_by` once the round trips measured between the frames in
/// `rtt_to_receiver` and `rtt_to_sender` are taken into account.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NagleHold {
    pub sender: String,
    pub receiver: String,
    /// The oldest of the sender's segments that `ack` was the first to acknowledge.
    pub oldest: u64,
    /// The last data segment before the silence.
    pub before: u64,
    pub ack: u64,
    /// The first data segment after the silence: the released data.
    pub after: u64,
    /// Payload of a full-sized segment from the sender.
    pub full_segment: u32,
    /// The SYN and SYN-ACK that announced the MSS values (empty when not captured).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syns: Vec<u64>,
    /// The sender's segments carry the 12-byte timestamp option.
    pub timestamps: bool,
    /// The frames the round trip from the capture point to the receiver was measured between
    /// (the sender's segment, the receiver's answer); absent when the capture shows none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_to_receiver: Option<[u64; 2]>,
    /// The same towards the sender (the receiver's segment, the sender's answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_to_sender: Option<[u64; 2]>,
    pub released_by: ReleasedBy,
}

/// The frames of one exchange `rtt_bound` counted as sequential.
///
/// What must hold (the audit checks each): `request` is data from the client and `response`
/// data from the server, later; from `request` to `response` no client data follows server
/// data (one request, then its response); `response` came at least the round trip measured
/// between the frames of `rtt_to_server` after `request`; with `previous_response`, that frame
/// is server data before `request`, no client data lies between them, and `request` left at
/// least the round trip of `rtt_to_client` after it. Each pair is one side's segment (not a
/// retransmission) and the first later segment from the other side acknowledging it: a data →
/// ACK time can never be shorter than the path's round trip, so an exchange that spans one
/// spans the round trip.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SequentialExchange {
    /// The request's first segment.
    pub request: u64,
    /// The response's last segment.
    pub response: u64,
    /// The previous response's last segment, when the request followed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_response: Option<u64>,
    /// The SYN and SYN-ACK of the flow, when captured (where the retransmission scan starts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syns: Vec<u64>,
    /// The client's segment and the server's answer the round trip towards the server was
    /// measured between.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_to_server: Option<[u64; 2]>,
    /// The server's segment and the client's answer (the round trip towards the client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_to_client: Option<[u64; 2]>,
}

/// The frames of one pause `fragmented_writes` counted as a congestion-window wait.
///
/// What must hold (the audit checks each): from `first` to `before` the sender sent exactly
/// `segments` data segments carrying `bytes` in all, at least four, and on average at most
/// half of `full_segment`; `full_segment` is no more than the MSS the SYNs in `syns` allow
/// (when given); nothing from the sender carries data between `before` and `after`, and
/// `after` does; `ack` is a segment from the receiver between `first` and `after` that
/// acknowledges some of the flight (its ACK number is past `first`'s sequence number), and
/// `after` passed the capture point after it: the rest left only once an ACK came back.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowWait {
    pub sender: String,
    pub receiver: String,
    /// The flight's first and last data segments.
    pub first: u64,
    pub before: u64,
    /// The first segment from the receiver acknowledging some of the flight.
    pub ack: u64,
    /// The first data segment after the pause.
    pub after: u64,
    pub segments: u32,
    pub bytes: u64,
    /// Payload of a full-sized segment from the sender.
    pub full_segment: u32,
    /// The SYN and SYN-ACK that announced the MSS values (empty when not captured).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syns: Vec<u64>,
}
