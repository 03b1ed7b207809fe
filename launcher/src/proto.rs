//! The bootstrap wire protocol: length-prefixed frames carrying one message each.
//!
//! Sans-IO: this module turns messages into bytes and bytes into messages; sockets live in
//! `client` and `server`. A frame is a little-endian `u32` body length followed by the body,
//! whose first byte is the message tag. Lengths inside a body are `u32` as well, so a corrupt
//! stream is caught by bounds checks instead of large allocations.

use crate::error::ProtoError;

/// Largest frame body accepted (an allgather of 4096 ranks × 4 KiB fits with room to spare).
pub const MAX_FRAME: usize = 64 << 20;

/// How a rank process ended, as an agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankEnd {
    /// Normal exit with this code.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

/// Messages a rank or an agent sends to the launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToServer {
    /// First message of a rank's connection.
    HelloRank {
        /// Job key the rank was given.
        job_key: u64,
        /// The rank.
        rank: u32,
    },
    /// First message of a remote agent's control connection.
    HelloAgent {
        /// Job key the agent was given.
        job_key: u64,
        /// Index of the agent's host in the launcher's host list.
        host: u32,
    },
    /// Only message of a short connection that asks the launcher to end the job.
    HelloAbort {
        /// Job key.
        job_key: u64,
        /// The rank that aborts.
        rank: u32,
        /// Exit code for the whole job.
        code: i32,
    },
    /// Store `value` under `key`; visible to every rank after the next fence.
    Put {
        /// Key.
        key: String,
        /// Value.
        value: Vec<u8>,
    },
    /// Collective: wait until every rank's earlier puts are stored.
    Fence,
    /// Read a key.
    Get {
        /// Key.
        key: String,
    },
    /// Collective: contribute one fixed-size blob.
    Allgather {
        /// This rank's blob.
        data: Vec<u8>,
    },
    /// Collective: receive the root's bytes (the root sends them).
    Broadcast {
        /// Root rank.
        root: u32,
        /// The data (root only).
        data: Option<Vec<u8>>,
    },
    /// Collective: wait for every rank.
    Barrier,
    /// Agent: a rank process was started.
    RankStarted {
        /// The rank.
        rank: u32,
        /// Its process id on the agent's host.
        pid: u32,
    },
    /// Agent: a rank process ended.
    RankExited {
        /// The rank.
        rank: u32,
        /// Its process id.
        pid: u32,
        /// How it ended.
        end: RankEnd,
    },
    /// Agent: a rank could not be started.
    SpawnFailed {
        /// The rank.
        rank: u32,
        /// Why, in one line.
        reason: String,
    },
}

/// Messages the launcher sends to a rank or an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToClient {
    /// The hello was accepted.
    Welcome,
    /// The hello was refused; the connection is closed after this.
    Refused {
        /// Why.
        reason: String,
    },
    /// A fence or barrier completed.
    Done,
    /// Answer to `Get`: `None` when no rank put the key.
    Value {
        /// The value.
        value: Option<Vec<u8>>,
    },
    /// Every rank's allgather blob, in rank order.
    Gathered {
        /// One blob per rank.
        blobs: Vec<Vec<u8>>,
    },
    /// The broadcast data.
    Broadcasted {
        /// The root's bytes.
        data: Vec<u8>,
    },
    /// A collective failed.
    Failed {
        /// Why.
        reason: String,
    },
    /// The abort was recorded; the launcher is ending the job.
    AbortAck,
    /// Agent: terminate your ranks now.
    Kill,
}

impl ToClient {
    /// A short name for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            ToClient::Welcome => "Welcome",
            ToClient::Refused { .. } => "Refused",
            ToClient::Done => "Done",
            ToClient::Value { .. } => "Value",
            ToClient::Gathered { .. } => "Gathered",
            ToClient::Broadcasted { .. } => "Broadcasted",
            ToClient::Failed { .. } => "Failed",
            ToClient::AbortAck => "AbortAck",
            ToClient::Kill => "Kill",
        }
    }
}

// Tags: 0x0_ rank/agent hellos, 0x1_ rank requests, 0x2_ agent reports, 0x8_ replies.
const T_HELLO_RANK: u8 = 0x01;
const T_HELLO_AGENT: u8 = 0x02;
const T_HELLO_ABORT: u8 = 0x03;
const T_PUT: u8 = 0x10;
const T_FENCE: u8 = 0x11;
const T_GET: u8 = 0x12;
const T_ALLGATHER: u8 = 0x13;
const T_BROADCAST: u8 = 0x14;
const T_BARRIER: u8 = 0x15;
const T_RANK_STARTED: u8 = 0x20;
const T_RANK_EXITED: u8 = 0x21;
const T_SPAWN_FAILED: u8 = 0x22;
const T_WELCOME: u8 = 0x80;
const T_REFUSED: u8 = 0x81;
const T_DONE: u8 = 0x82;
const T_VALUE: u8 = 0x83;
const T_GATHERED: u8 = 0x84;
const T_BROADCASTED: u8 = 0x85;
const T_FAILED: u8 = 0x86;
const T_ABORT_ACK: u8 = 0x87;
const T_KILL: u8 = 0x88;

/// Builds one frame: the length prefix is patched in at the end.
struct Enc {
    buf: Vec<u8>,
}

impl Enc {
    fn new(tag: u8) -> Enc {
        let mut buf = Vec::with_capacity(32);
        buf.extend_from_slice(&[0, 0, 0, 0, tag]);
        Enc { buf }
    }
    fn u32(mut self, v: u32) -> Enc {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Enc {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Enc {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u8(mut self, v: u8) -> Enc {
        self.buf.push(v);
        self
    }
    fn bytes(self, v: &[u8]) -> Enc {
        // Lengths are bounded by MAX_FRAME on decode; encoding saturates so an oversize
        // value produces a frame the peer rejects rather than a silently wrapped length.
        let len = u32::try_from(v.len()).unwrap_or(u32::MAX);
        let mut e = self.u32(len);
        e.buf.extend_from_slice(v);
        e
    }
    fn finish(mut self) -> Vec<u8> {
        let body = self.buf.len() - 4;
        let len = u32::try_from(body).unwrap_or(u32::MAX);
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        self.buf
    }
}

/// Reads fields from a frame body, failing with the field name when bytes are missing.
struct Dec<'a> {
    buf: &'a [u8],
}

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ProtoError> {
        if self.buf.len() < n {
            return Err(ProtoError::Truncated {
                field,
                need: n - self.buf.len(),
            });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn arr<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ProtoError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, ProtoError> {
        Ok(self.arr::<1>(field)?[0])
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, ProtoError> {
        Ok(u32::from_le_bytes(self.arr(field)?))
    }
    fn i32(&mut self, field: &'static str) -> Result<i32, ProtoError> {
        Ok(i32::from_le_bytes(self.arr(field)?))
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, ProtoError> {
        Ok(u64::from_le_bytes(self.arr(field)?))
    }
    fn bytes(&mut self, field: &'static str) -> Result<Vec<u8>, ProtoError> {
        let len = self.u32(field)? as usize;
        Ok(self.take(len, field)?.to_vec())
    }
    fn string(&mut self, field: &'static str) -> Result<String, ProtoError> {
        String::from_utf8(self.bytes(field)?).map_err(|_| ProtoError::BadUtf8 { field })
    }
    fn opt_bytes(&mut self, field: &'static str) -> Result<Option<Vec<u8>>, ProtoError> {
        match self.u8(field)? {
            0 => Ok(None),
            1 => Ok(Some(self.bytes(field)?)),
            v => Err(ProtoError::BadValue {
                field,
                value: u64::from(v),
            }),
        }
    }
    fn end(self) -> Result<(), ProtoError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(ProtoError::TrailingBytes {
                extra: self.buf.len(),
            })
        }
    }
}

/// Encodes a message to the launcher as one frame (length prefix included).
pub fn encode_to_server(msg: &ToServer) -> Vec<u8> {
    match msg {
        ToServer::HelloRank { job_key, rank } => Enc::new(T_HELLO_RANK).u64(*job_key).u32(*rank),
        ToServer::HelloAgent { job_key, host } => Enc::new(T_HELLO_AGENT).u64(*job_key).u32(*host),
        ToServer::HelloAbort {
            job_key,
            rank,
            code,
        } => Enc::new(T_HELLO_ABORT).u64(*job_key).u32(*rank).i32(*code),
        ToServer::Put { key, value } => Enc::new(T_PUT).bytes(key.as_bytes()).bytes(value),
        ToServer::Fence => Enc::new(T_FENCE),
        ToServer::Get { key } => Enc::new(T_GET).bytes(key.as_bytes()),
        ToServer::Allgather { data } => Enc::new(T_ALLGATHER).bytes(data),
        ToServer::Broadcast { root, data } => {
            let e = Enc::new(T_BROADCAST).u32(*root);
            match data {
                None => e.u8(0),
                Some(d) => e.u8(1).bytes(d),
            }
        }
        ToServer::Barrier => Enc::new(T_BARRIER),
        ToServer::RankStarted { rank, pid } => Enc::new(T_RANK_STARTED).u32(*rank).u32(*pid),
        ToServer::RankExited { rank, pid, end } => {
            let e = Enc::new(T_RANK_EXITED).u32(*rank).u32(*pid);
            match end {
                RankEnd::Code(c) => e.u8(0).i32(*c),
                RankEnd::Signal(s) => e.u8(1).i32(*s),
            }
        }
        ToServer::SpawnFailed { rank, reason } => {
            Enc::new(T_SPAWN_FAILED).u32(*rank).bytes(reason.as_bytes())
        }
    }
    .finish()
}

/// Encodes a message from the launcher as one frame (length prefix included).
pub fn encode_to_client(msg: &ToClient) -> Vec<u8> {
    match msg {
        ToClient::Welcome => Enc::new(T_WELCOME),
        ToClient::Refused { reason } => Enc::new(T_REFUSED).bytes(reason.as_bytes()),
        ToClient::Done => Enc::new(T_DONE),
        ToClient::Value { value } => match value {
            None => Enc::new(T_VALUE).u8(0),
            Some(v) => Enc::new(T_VALUE).u8(1).bytes(v),
        },
        ToClient::Gathered { blobs } => {
            let count = u32::try_from(blobs.len()).unwrap_or(u32::MAX);
            blobs
                .iter()
                .fold(Enc::new(T_GATHERED).u32(count), |e, b| e.bytes(b))
        }
        ToClient::Broadcasted { data } => Enc::new(T_BROADCASTED).bytes(data),
        ToClient::Failed { reason } => Enc::new(T_FAILED).bytes(reason.as_bytes()),
        ToClient::AbortAck => Enc::new(T_ABORT_ACK),
        ToClient::Kill => Enc::new(T_KILL),
    }
    .finish()
}

/// Reads the length prefix of a frame: `Ok(None)` until 4 bytes are there.
pub fn frame_len(prefix: &[u8]) -> Result<Option<usize>, ProtoError> {
    let Some(head) = prefix.get(..4) else {
        return Ok(None);
    };
    let mut arr = [0u8; 4];
    arr.copy_from_slice(head);
    let len = u32::from_le_bytes(arr) as usize;
    if len > MAX_FRAME {
        return Err(ProtoError::FrameTooLarge {
            len: len as u64,
            max: MAX_FRAME as u64,
        });
    }
    Ok(Some(len))
}

/// Splits one complete frame off the front of `buf`: `Ok(None)` when more bytes are needed,
/// otherwise the body and the number of bytes consumed.
pub fn split_frame(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ProtoError> {
    let Some(len) = frame_len(buf)? else {
        return Ok(None);
    };
    match buf.get(4..4 + len) {
        Some(body) => Ok(Some((body, 4 + len))),
        None => Ok(None),
    }
}

/// Decodes a frame body (without the length prefix) sent to the launcher.
pub fn decode_to_server(body: &[u8]) -> Result<ToServer, ProtoError> {
    let mut d = Dec { buf: body };
    let msg = match d.u8("tag")? {
        T_HELLO_RANK => ToServer::HelloRank {
            job_key: d.u64("job_key")?,
            rank: d.u32("rank")?,
        },
        T_HELLO_AGENT => ToServer::HelloAgent {
            job_key: d.u64("job_key")?,
            host: d.u32("host")?,
        },
        T_HELLO_ABORT => ToServer::HelloAbort {
            job_key: d.u64("job_key")?,
            rank: d.u32("rank")?,
            code: d.i32("code")?,
        },
        T_PUT => ToServer::Put {
            key: d.string("key")?,
            value: d.bytes("value")?,
        },
        T_FENCE => ToServer::Fence,
        T_GET => ToServer::Get {
            key: d.string("key")?,
        },
        T_ALLGATHER => ToServer::Allgather {
            data: d.bytes("data")?,
        },
        T_BROADCAST => ToServer::Broadcast {
            root: d.u32("root")?,
            data: d.opt_bytes("data")?,
        },
        T_BARRIER => ToServer::Barrier,
        T_RANK_STARTED => ToServer::RankStarted {
            rank: d.u32("rank")?,
            pid: d.u32("pid")?,
        },
        T_RANK_EXITED => {
            let rank = d.u32("rank")?;
            let pid = d.u32("pid")?;
            let end = match d.u8("end kind")? {
                0 => RankEnd::Code(d.i32("exit code")?),
                1 => RankEnd::Signal(d.i32("signal")?),
                v => {
                    return Err(ProtoError::BadValue {
                        field: "end kind",
                        value: u64::from(v),
                    })
                }
            };
            ToServer::RankExited { rank, pid, end }
        }
        T_SPAWN_FAILED => ToServer::SpawnFailed {
            rank: d.u32("rank")?,
            reason: d.string("reason")?,
        },
        tag => return Err(ProtoError::UnknownTag { tag }),
    };
    d.end()?;
    Ok(msg)
}

/// Decodes a frame body (without the length prefix) sent by the launcher.
pub fn decode_to_client(body: &[u8]) -> Result<ToClient, ProtoError> {
    let mut d = Dec { buf: body };
    let msg = match d.u8("tag")? {
        T_WELCOME => ToClient::Welcome,
        T_REFUSED => ToClient::Refused {
            reason: d.string("reason")?,
        },
        T_DONE => ToClient::Done,
        T_VALUE => ToClient::Value {
            value: d.opt_bytes("value")?,
        },
        T_GATHERED => {
            let count = d.u32("blob count")? as usize;
            // Each blob costs at least its 4-byte length, which bounds `count` by the frame.
            if count > d.buf.len() / 4 {
                return Err(ProtoError::BadValue {
                    field: "blob count",
                    value: count as u64,
                });
            }
            let mut blobs = Vec::with_capacity(count);
            for _ in 0..count {
                blobs.push(d.bytes("blob")?);
            }
            ToClient::Gathered { blobs }
        }
        T_BROADCASTED => ToClient::Broadcasted {
            data: d.bytes("data")?,
        },
        T_FAILED => ToClient::Failed {
            reason: d.string("reason")?,
        },
        T_ABORT_ACK => ToClient::AbortAck,
        T_KILL => ToClient::Kill,
        tag => return Err(ProtoError::UnknownTag { tag }),
    };
    d.end()?;
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_to_server() -> Vec<ToServer> {
        vec![
            ToServer::HelloRank {
                job_key: 0x0123_4567_89ab_cdef,
                rank: 7,
            },
            ToServer::HelloAgent {
                job_key: u64::MAX,
                host: 1,
            },
            ToServer::HelloAbort {
                job_key: 5,
                rank: 2,
                code: -3,
            },
            ToServer::Put {
                key: "addr/3".into(),
                value: vec![1, 2, 3],
            },
            ToServer::Fence,
            ToServer::Get { key: "é".into() },
            ToServer::Allgather { data: vec![9; 17] },
            ToServer::Broadcast {
                root: 1,
                data: None,
            },
            ToServer::Broadcast {
                root: 0,
                data: Some(vec![]),
            },
            ToServer::Barrier,
            ToServer::RankStarted { rank: 3, pid: 999 },
            ToServer::RankExited {
                rank: 3,
                pid: 999,
                end: RankEnd::Code(3),
            },
            ToServer::RankExited {
                rank: 1,
                pid: 4,
                end: RankEnd::Signal(9),
            },
            ToServer::SpawnFailed {
                rank: 0,
                reason: "no such file".into(),
            },
        ]
    }

    fn all_to_client() -> Vec<ToClient> {
        vec![
            ToClient::Welcome,
            ToClient::Refused {
                reason: "bad key".into(),
            },
            ToClient::Done,
            ToClient::Value { value: None },
            ToClient::Value {
                value: Some(vec![0, 255]),
            },
            ToClient::Gathered {
                blobs: vec![vec![1, 2], vec![3, 4], vec![5, 6]],
            },
            ToClient::Gathered { blobs: vec![] },
            ToClient::Broadcasted { data: vec![42; 5] },
            ToClient::Failed { reason: "x".into() },
            ToClient::AbortAck,
            ToClient::Kill,
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in all_to_server() {
            let f = encode_to_server(&m);
            let (body, used) = split_frame(&f).unwrap().unwrap();
            assert_eq!(used, f.len());
            assert_eq!(decode_to_server(body).unwrap(), m);
        }
        for m in all_to_client() {
            let f = encode_to_client(&m);
            let (body, used) = split_frame(&f).unwrap().unwrap();
            assert_eq!(used, f.len());
            assert_eq!(decode_to_client(body).unwrap(), m);
        }
    }

    #[test]
    fn wire_layout_is_fixed() {
        let f = encode_to_server(&ToServer::HelloRank {
            job_key: 0x1122_3344_5566_7788,
            rank: 2,
        });
        assert_eq!(
            f,
            vec![13, 0, 0, 0, 0x01, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 2, 0, 0, 0]
        );
        let f = encode_to_client(&ToClient::Value {
            value: Some(vec![7]),
        });
        assert_eq!(f, vec![7, 0, 0, 0, 0x83, 1, 1, 0, 0, 0, 7]);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        for m in all_to_server() {
            let f = encode_to_server(&m);
            for cut in 5..f.len() {
                assert!(decode_to_server(&f[4..cut]).is_err(), "{m:?} cut at {cut}");
            }
            assert_eq!(split_frame(&f[..f.len() - 1]).unwrap(), None);
        }
        for m in all_to_client() {
            let f = encode_to_client(&m);
            for cut in 5..f.len() {
                assert!(decode_to_client(&f[4..cut]).is_err(), "{m:?} cut at {cut}");
            }
        }
        assert_eq!(
            decode_to_server(&[]),
            Err(ProtoError::Truncated {
                field: "tag",
                need: 1
            })
        );
    }

    #[test]
    fn malformed_frames_get_typed_errors() {
        assert_eq!(
            decode_to_server(&[0x7f]),
            Err(ProtoError::UnknownTag { tag: 0x7f })
        );
        assert_eq!(
            decode_to_client(&[0x10]),
            Err(ProtoError::UnknownTag { tag: 0x10 })
        );
        assert_eq!(
            decode_to_server(&[T_FENCE, 0]),
            Err(ProtoError::TrailingBytes { extra: 1 })
        );
        assert_eq!(
            decode_to_server(&[T_GET, 2, 0, 0, 0, 0xff, 0xfe]),
            Err(ProtoError::BadUtf8 { field: "key" })
        );
        assert_eq!(
            decode_to_server(&[T_BROADCAST, 0, 0, 0, 0, 2]),
            Err(ProtoError::BadValue {
                field: "data",
                value: 2
            })
        );
        // A blob count far beyond the frame is refused before allocating.
        assert_eq!(
            decode_to_client(&[T_GATHERED, 0xff, 0xff, 0xff, 0x7f]),
            Err(ProtoError::BadValue {
                field: "blob count",
                value: 0x7fff_ffff
            })
        );
        assert_eq!(
            split_frame(&[0xff, 0xff, 0xff, 0xff, 0]),
            Err(ProtoError::FrameTooLarge {
                len: 0xffff_ffff,
                max: MAX_FRAME as u64
            })
        );
        // A length prefix that lies about a string inside the body.
        assert_eq!(
            decode_to_server(&[T_GET, 9, 0, 0, 0, b'a']),
            Err(ProtoError::Truncated {
                field: "key",
                need: 8
            })
        );
    }

    #[test]
    fn split_frame_walks_a_stream_of_frames() {
        let mut stream = encode_to_server(&ToServer::Barrier);
        stream.extend(encode_to_server(&ToServer::Get { key: "k".into() }));
        let (b1, n1) = split_frame(&stream).unwrap().unwrap();
        assert_eq!(decode_to_server(b1).unwrap(), ToServer::Barrier);
        let (b2, n2) = split_frame(&stream[n1..]).unwrap().unwrap();
        assert_eq!(
            decode_to_server(b2).unwrap(),
            ToServer::Get { key: "k".into() }
        );
        assert_eq!(n1 + n2, stream.len());
        assert_eq!(split_frame(&stream[..3]).unwrap(), None);
    }
}
