//! Trains: the datagrams of one transmit pass to one peer, gathered so that the link sends
//! them in one system call (UDP segmentation offload, see [`crate::udp_offload`]).
//!
//! Only links whose datagrams are smaller than the UDP limit gather ([`Link::sends_trains`]):
//! there a 1 MiB put is some 800 datagrams, and one `sendmsg` each would cost more than the
//! copy that joins them. A train is a run of datagrams of one size to one peer; a shorter
//! datagram ends it (segmentation cuts the buffer into equal pieces, the last may be short).

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{Interface, State};
use crate::engine::Engine;
use crate::error::PtlResult;
use crate::link::Link;
use crate::message::Tail;
use crate::types::PhysId;
use crate::udp_offload::{MAX_SEGMENTS, MAX_TRAIN};

/// The train being gathered.
pub(super) struct Train {
    buf: Vec<u8>,
    /// Bytes of each datagram of the train (the first one's size).
    seg: usize,
    count: usize,
    dest: Option<PhysId>,
}

impl Train {
    pub(super) fn new() -> Train {
        Train {
            buf: Vec::new(),
            seg: 0,
            count: 0,
            dest: None,
        }
    }

    /// Adds the datagram `head` + `tail` for `dest`, first sending the train gathered so far
    /// when the datagram cannot join it (another peer, a larger datagram, a full train).
    pub(super) fn push(&mut self, link: &dyn Link, head: &[u8], tail: Tail<'_>, dest: PhysId) {
        let len = head.len() + tail.len();
        let joins = self.dest == Some(dest)
            && len <= self.seg
            && self.count < MAX_SEGMENTS
            && self.buf.len() + len <= MAX_TRAIN;
        if !joins {
            self.flush(link);
        }
        if self.count == 0 {
            if self.buf.capacity() == 0 {
                self.buf.reserve_exact(MAX_TRAIN);
            }
            self.dest = Some(dest);
            self.seg = len;
        }
        self.buf.extend_from_slice(head);
        tail.append_to(&mut self.buf);
        self.count += 1;
        // A short datagram can only be a train's last; a full train leaves now.
        if len < self.seg || self.count == MAX_SEGMENTS || self.buf.len() + self.seg > MAX_TRAIN {
            self.flush(link);
        }
    }

    /// Sends the train gathered so far, if any.
    pub(super) fn flush(&mut self, link: &dyn Link) {
        let Some(dest) = self.dest.take() else {
            return;
        };
        let sent = if self.count == 1 {
            link.send_to(&self.buf, dest)
        } else {
            link.send_train(&self.buf, self.seg, dest)
        };
        if let Err(e) = sent {
            // As for a single datagram: the transport's retransmission and peer timeout decide
            // what a failed send means.
            tracing::debug!(%dest, error = %e, datagrams = self.count, "train send failed");
        }
        self.buf.clear();
        self.count = 0;
    }
}

impl Interface {
    /// The datagrams of a coalesced train in `st.rx` (`len` bytes of `seg`-byte datagrams from
    /// `from`), each handled as [`Interface::progress_until`] handles one; returns the first
    /// value `until` gave, after the whole train.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn take_train<T>(
        &self,
        st: &mut State,
        now: Instant,
        from: PhysId,
        len: usize,
        seg: usize,
        transmit: bool,
        until: &mut impl FnMut(&mut Engine) -> PtlResult<Option<T>>,
    ) -> PtlResult<Option<T>> {
        let mut found = None;
        let mut at = 0;
        while at < len {
            let end = (at + seg).min(len);
            let State { stack, rx, .. } = &mut *st;
            let delivered = stack.transport.stats().messages_delivered;
            stack.handle_datagram(now, from, rx.get(at..end).unwrap_or_default());
            at = end;
            let message = stack.transport.stats().messages_delivered != delivered;
            if message && (stack.engine.has_outgoing() || stack.transport.has_events()) {
                stack.pump(now);
            }
            if transmit {
                self.transmit(st, now);
            }
            if message && found.is_none() {
                found = until(&mut st.stack.engine)?;
            }
        }
        if !transmit && found.is_none() {
            // As in `progress_until`: held back only for a caller that may answer.
            self.transmit(st, now);
        }
        let leaving = st.stack.transport.stats().peers_leaving;
        // Relaxed: as in `progress_until`.
        self.inner.departures.store(leaving, Ordering::Relaxed);
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Records what it is asked to send: `(dest port, bytes, seg)` per call.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<(u32, Vec<u8>, usize)>>);

    impl Link for Recorder {
        fn local_id(&self) -> PhysId {
            PhysId { nid: 1, pid: 1 }
        }
        fn send_to(&self, d: &[u8], to: PhysId) -> io::Result<()> {
            self.0.lock().unwrap().push((to.pid, d.to_vec(), d.len()));
            Ok(())
        }
        fn send_train(&self, t: &[u8], seg: usize, to: PhysId) -> io::Result<()> {
            self.0.lock().unwrap().push((to.pid, t.to_vec(), seg));
            Ok(())
        }
        fn recv(&self, _: &mut [u8]) -> io::Result<Option<(usize, PhysId)>> {
            Ok(None)
        }
        fn wait_readable(&self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    fn peer(pid: u32) -> PhysId {
        PhysId { nid: 7, pid }
    }

    #[test]
    fn runs_of_equal_datagrams_to_one_peer_form_trains() {
        let link = Recorder::default();
        let mut t = Train::new();
        // Three full datagrams and a short one to peer 1, then one to peer 2, then two
        // to peer 1 again.
        for i in 0..3u8 {
            t.push(&link, &[i; 4], Tail::Bytes(&[i; 6]), peer(1));
        }
        t.push(&link, &[9; 3], Tail::Bytes(&[]), peer(1));
        t.push(&link, &[5; 10], Tail::Bytes(&[]), peer(2));
        t.push(&link, &[6; 10], Tail::Bytes(&[]), peer(1));
        t.push(&link, &[7; 11], Tail::Bytes(&[]), peer(1));
        t.flush(&link);
        t.flush(&link);
        let sent = link.0.into_inner().unwrap();
        let mut first = Vec::new();
        for i in 0..3u8 {
            first.extend_from_slice(&[i; 10]);
        }
        first.extend_from_slice(&[9; 3]);
        assert_eq!(
            sent,
            vec![
                (1, first, 10),
                (2, vec![5; 10], 10),
                // A larger datagram cannot join a train of smaller ones.
                (1, vec![6; 10], 10),
                (1, vec![7; 11], 11),
            ]
        );
    }

    #[test]
    fn a_train_leaves_when_full() {
        let link = Recorder::default();
        let mut t = Train::new();
        for _ in 0..MAX_SEGMENTS + 1 {
            t.push(&link, &[1; 100], Tail::Bytes(&[]), peer(1));
        }
        // Large datagrams: the byte limit comes first.
        for _ in 0..3 {
            t.push(&link, &[2; 30_000], Tail::Bytes(&[]), peer(1));
        }
        t.flush(&link);
        let sizes: Vec<(usize, usize)> = link
            .0
            .into_inner()
            .unwrap()
            .iter()
            .map(|(_, b, seg)| (b.len(), *seg))
            .collect();
        assert_eq!(
            sizes,
            vec![
                (100 * MAX_SEGMENTS, 100),
                (100, 100),
                (60_000, 30_000),
                (30_000, 30_000)
            ]
        );
    }
}
