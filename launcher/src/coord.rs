//! The launcher's bootstrap coordinator: the state of connections, the key-value store and the
//! collective in progress, as a sans-IO state machine.
//!
//! The TCP layer (`server`) feeds it `on_message` / `on_disconnect` and carries out the
//! [`Action`]s it returns. Collectives are matched strictly: every rank must enter the same
//! collective (same kind, same root, same blob size) in the same order. A mismatch, or a rank
//! that leaves while others wait, fails the collective for every waiter with a reason instead of
//! leaving them blocked — and poisons later collectives, since the ranks can no longer agree.

use std::collections::HashMap;

use crate::proto::{RankEnd, ToClient, ToServer};

/// Identifies one connection of the TCP layer.
pub type ConnId = u64;

/// What the TCP layer must do after a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this message on this connection.
    Send(ConnId, ToClient),
    /// Close this connection (after sending what precedes this action).
    Close(ConnId),
    /// Tell the launcher.
    Report(Report),
}

/// Events the launcher acts on (failure handling, verbose tracing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A rank connected and presented the right key.
    RankJoined {
        /// The rank.
        rank: u32,
    },
    /// A rank's bootstrap connection closed.
    RankLeft {
        /// The rank.
        rank: u32,
    },
    /// A collective completed on every rank.
    Phase {
        /// `fence`, `barrier`, `allgather` or `broadcast`.
        op: &'static str,
        /// How many of this kind have completed so far (1-based).
        count: u64,
    },
    /// A collective failed.
    CollectiveFailed {
        /// Why.
        reason: String,
    },
    /// A rank asked to end the job.
    Abort {
        /// The rank.
        rank: u32,
        /// The job's exit code.
        code: i32,
    },
    /// A remote agent connected.
    AgentJoined {
        /// Host index.
        host: u32,
    },
    /// A remote agent's control connection closed.
    AgentLeft {
        /// Host index.
        host: u32,
    },
    /// An agent started a rank.
    RankStarted {
        /// Host index.
        host: u32,
        /// The rank.
        rank: u32,
        /// Its pid on that host.
        pid: u32,
    },
    /// An agent saw a rank end.
    RankExited {
        /// Host index.
        host: u32,
        /// The rank.
        rank: u32,
        /// Its pid on that host.
        pid: u32,
        /// How it ended.
        end: RankEnd,
    },
    /// An agent could not start a rank.
    SpawnFailed {
        /// Host index.
        host: u32,
        /// The rank.
        rank: u32,
        /// Why.
        reason: String,
    },
    /// A connection sent something that is not allowed in its state; it was closed.
    Misbehaved {
        /// What happened.
        what: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    Unknown,
    Rank(u32),
    Agent(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Fence,
    Barrier,
    Allgather { len: usize },
    Broadcast { root: u32 },
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Fence => "fence",
            Op::Barrier => "barrier",
            Op::Allgather { .. } => "allgather",
            Op::Broadcast { .. } => "broadcast",
        }
    }
    fn describe(self) -> String {
        match self {
            Op::Allgather { len } => format!("allgather of {len}-byte blobs"),
            Op::Broadcast { root } => format!("broadcast from root {root}"),
            other => other.name().to_string(),
        }
    }
}

struct Pending {
    op: Op,
    arrived: Vec<bool>,
    count: u32,
    blobs: Vec<Vec<u8>>,
    bcast: Option<Vec<u8>>,
}

/// The coordinator of one job.
pub struct Coordinator {
    size: u32,
    num_hosts: u32,
    job_key: u64,
    peers: HashMap<ConnId, Peer>,
    rank_conn: Vec<Option<ConnId>>,
    rank_left: Vec<bool>,
    agent_conn: Vec<Option<ConnId>>,
    kv: HashMap<String, Vec<u8>>,
    pending: Option<Pending>,
    broken: Option<String>,
    completed: [u64; 4],
}

impl Coordinator {
    /// A coordinator for `size` ranks on `num_hosts` agent hosts (0 for local jobs).
    pub fn new(size: u32, num_hosts: u32, job_key: u64) -> Coordinator {
        Coordinator {
            size,
            num_hosts,
            job_key,
            peers: HashMap::new(),
            rank_conn: vec![None; size as usize],
            rank_left: vec![false; size as usize],
            agent_conn: vec![None; num_hosts as usize],
            kv: HashMap::new(),
            pending: None,
            broken: None,
            completed: [0; 4],
        }
    }

    /// Connection ids of the agents that are connected (to send them `Kill`).
    pub fn agent_conns(&self) -> Vec<ConnId> {
        self.agent_conn.iter().flatten().copied().collect()
    }

    /// A new connection was accepted.
    pub fn on_connect(&mut self, conn: ConnId) {
        self.peers.insert(conn, Peer::Unknown);
    }

    /// A message arrived on `conn`; the resulting actions are appended to `out`.
    pub fn on_message(&mut self, conn: ConnId, msg: ToServer, out: &mut Vec<Action>) {
        let peer = self.peers.get(&conn).copied().unwrap_or(Peer::Unknown);
        match (peer, msg) {
            (Peer::Unknown, ToServer::HelloRank { job_key, rank }) => {
                self.hello_rank(conn, job_key, rank, out)
            }
            (Peer::Unknown, ToServer::HelloAgent { job_key, host }) => {
                self.hello_agent(conn, job_key, host, out)
            }
            (
                Peer::Unknown,
                ToServer::HelloAbort {
                    job_key,
                    rank,
                    code,
                },
            ) => {
                if job_key != self.job_key {
                    self.refuse(conn, "wrong job key".into(), out);
                } else if rank >= self.size {
                    self.refuse(
                        conn,
                        format!("rank {rank} is not below the job size {}", self.size),
                        out,
                    );
                } else {
                    out.push(Action::Report(Report::Abort { rank, code }));
                    out.push(Action::Send(conn, ToClient::AbortAck));
                    out.push(Action::Close(conn));
                }
            }
            (Peer::Unknown, other) => {
                let what = format!("connection {conn} sent {other:?} before a hello");
                self.refuse(
                    conn,
                    "the first message must be a hello with the job key".into(),
                    out,
                );
                out.push(Action::Report(Report::Misbehaved { what }));
            }
            (Peer::Rank(rank), msg) => self.rank_message(conn, rank, msg, out),
            (Peer::Agent(host), msg) => self.agent_message(conn, host, msg, out),
        }
    }

    /// The connection closed (EOF or error).
    pub fn on_disconnect(&mut self, conn: ConnId, out: &mut Vec<Action>) {
        match self.peers.remove(&conn) {
            Some(Peer::Rank(rank)) => {
                self.rank_conn[rank as usize] = None;
                self.rank_left[rank as usize] = true;
                out.push(Action::Report(Report::RankLeft { rank }));
                let reason = format!(
                    "rank {rank} left the bootstrap (its process ended or closed the connection)"
                );
                if let Some(p) = &self.pending {
                    if !p.arrived[rank as usize] {
                        self.fail_pending(reason.clone(), None, out);
                    }
                }
                if self.pending.is_none() && self.broken.is_none() {
                    self.broken = Some(reason);
                }
            }
            Some(Peer::Agent(host)) => {
                self.agent_conn[host as usize] = None;
                out.push(Action::Report(Report::AgentLeft { host }));
            }
            Some(Peer::Unknown) | None => {}
        }
    }

    fn refuse(&mut self, conn: ConnId, reason: String, out: &mut Vec<Action>) {
        self.peers.remove(&conn);
        out.push(Action::Send(conn, ToClient::Refused { reason }));
        out.push(Action::Close(conn));
    }

    fn hello_rank(&mut self, conn: ConnId, key: u64, rank: u32, out: &mut Vec<Action>) {
        let refusal = if key != self.job_key {
            Some("wrong job key".to_string())
        } else if rank >= self.size {
            Some(format!(
                "rank {rank} is not below the job size {}",
                self.size
            ))
        } else if self.rank_conn[rank as usize].is_some() {
            Some(format!("rank {rank} is already connected"))
        } else if self.rank_left[rank as usize] {
            Some(format!(
                "rank {rank} already left the bootstrap; it cannot join twice"
            ))
        } else {
            None
        };
        match refusal {
            Some(reason) => self.refuse(conn, reason, out),
            None => {
                self.peers.insert(conn, Peer::Rank(rank));
                self.rank_conn[rank as usize] = Some(conn);
                out.push(Action::Send(conn, ToClient::Welcome));
                out.push(Action::Report(Report::RankJoined { rank }));
            }
        }
    }

    fn hello_agent(&mut self, conn: ConnId, key: u64, host: u32, out: &mut Vec<Action>) {
        let refusal = if key != self.job_key {
            Some("wrong job key".to_string())
        } else if host >= self.num_hosts {
            Some(format!("host index {host} is not below {}", self.num_hosts))
        } else if self.agent_conn[host as usize].is_some() {
            Some(format!("an agent for host {host} is already connected"))
        } else {
            None
        };
        match refusal {
            Some(reason) => self.refuse(conn, reason, out),
            None => {
                self.peers.insert(conn, Peer::Agent(host));
                self.agent_conn[host as usize] = Some(conn);
                out.push(Action::Send(conn, ToClient::Welcome));
                out.push(Action::Report(Report::AgentJoined { host }));
            }
        }
    }

    fn agent_message(&mut self, conn: ConnId, host: u32, msg: ToServer, out: &mut Vec<Action>) {
        let report = match msg {
            ToServer::RankStarted { rank, pid } => Report::RankStarted { host, rank, pid },
            ToServer::RankExited { rank, pid, end } => Report::RankExited {
                host,
                rank,
                pid,
                end,
            },
            ToServer::SpawnFailed { rank, reason } => Report::SpawnFailed { host, rank, reason },
            other => {
                out.push(Action::Report(Report::Misbehaved {
                    what: format!("agent of host {host} sent {other:?}"),
                }));
                out.push(Action::Close(conn));
                return;
            }
        };
        out.push(Action::Report(report));
    }

    fn rank_message(&mut self, conn: ConnId, rank: u32, msg: ToServer, out: &mut Vec<Action>) {
        let (op, data) = match msg {
            ToServer::Put { key, value } => {
                self.kv.insert(key, value);
                return;
            }
            ToServer::Get { key } => {
                let value = self.kv.get(&key).cloned();
                out.push(Action::Send(conn, ToClient::Value { value }));
                return;
            }
            ToServer::Fence => (Op::Fence, None),
            ToServer::Barrier => (Op::Barrier, None),
            ToServer::Allgather { data } => (Op::Allgather { len: data.len() }, Some(data)),
            ToServer::Broadcast { root, data } => (Op::Broadcast { root }, data),
            other => {
                out.push(Action::Report(Report::Misbehaved {
                    what: format!("rank {rank} sent {other:?} after its hello"),
                }));
                out.push(Action::Close(conn));
                return;
            }
        };
        self.arrive(conn, rank, op, data, out);
    }

    fn arrive(
        &mut self,
        conn: ConnId,
        rank: u32,
        op: Op,
        data: Option<Vec<u8>>,
        out: &mut Vec<Action>,
    ) {
        if let Some(reason) = &self.broken {
            let reason = format!("{} (an earlier collective failed: {reason})", op.name());
            out.push(Action::Send(conn, ToClient::Failed { reason }));
            return;
        }
        if let Op::Broadcast { root } = op {
            if root >= self.size {
                let reason = format!(
                    "broadcast root {root} is not below the job size {}",
                    self.size
                );
                out.push(Action::Send(conn, ToClient::Failed { reason }));
                return;
            }
            if (root == rank) != data.is_some() {
                let reason = format!(
                    "broadcast from root {root}: rank {rank} must {} data",
                    if root == rank {
                        "provide"
                    } else {
                        "not provide"
                    }
                );
                self.fail_pending(reason, Some(conn), out);
                return;
            }
        }
        let size = self.size as usize;
        let pending = self.pending.get_or_insert_with(|| Pending {
            op,
            arrived: vec![false; size],
            count: 0,
            blobs: Vec::new(),
            bcast: None,
        });
        if pending.op != op {
            let reason = format!(
                "ranks disagree: rank {rank} entered {} while others are in {}",
                op.describe(),
                pending.op.describe()
            );
            self.fail_pending(reason, Some(conn), out);
            return;
        }
        if pending.arrived[rank as usize] {
            let reason = format!("rank {rank} entered {} twice", op.name());
            self.fail_pending(reason, Some(conn), out);
            return;
        }
        if let Some(left) = self.rank_left.iter().position(|&l| l) {
            let reason = format!("rank {left} left the bootstrap before {}", op.name());
            self.fail_pending(reason, Some(conn), out);
            return;
        }
        pending.arrived[rank as usize] = true;
        pending.count += 1;
        match op {
            Op::Allgather { .. } => {
                if pending.blobs.is_empty() {
                    pending.blobs = vec![Vec::new(); size];
                }
                pending.blobs[rank as usize] = data.unwrap_or_default();
            }
            Op::Broadcast { .. } => {
                if data.is_some() {
                    pending.bcast = data;
                }
            }
            Op::Fence | Op::Barrier => {}
        }
        if pending.count == self.size {
            self.complete(out);
        }
    }

    fn complete(&mut self, out: &mut Vec<Action>) {
        let Some(p) = self.pending.take() else {
            return;
        };
        let reply = match p.op {
            Op::Fence | Op::Barrier => ToClient::Done,
            Op::Allgather { .. } => ToClient::Gathered { blobs: p.blobs },
            Op::Broadcast { .. } => ToClient::Broadcasted {
                data: p.bcast.unwrap_or_default(),
            },
        };
        for conn in self.rank_conn.iter().flatten() {
            out.push(Action::Send(*conn, reply.clone()));
        }
        let idx = match p.op {
            Op::Fence => 0,
            Op::Barrier => 1,
            Op::Allgather { .. } => 2,
            Op::Broadcast { .. } => 3,
        };
        self.completed[idx] += 1;
        out.push(Action::Report(Report::Phase {
            op: p.op.name(),
            count: self.completed[idx],
        }));
    }

    /// Fails the pending collective for every rank that waits in it, plus `extra` (the
    /// connection whose request revealed the problem), and poisons later collectives.
    fn fail_pending(&mut self, reason: String, extra: Option<ConnId>, out: &mut Vec<Action>) {
        let mut conns: Vec<ConnId> = Vec::new();
        if let Some(p) = self.pending.take() {
            for (r, &a) in p.arrived.iter().enumerate() {
                if let (true, Some(c)) = (a, self.rank_conn[r]) {
                    conns.push(c);
                }
            }
        }
        if let Some(c) = extra {
            if !conns.contains(&c) {
                conns.push(c);
            }
        }
        for c in conns {
            out.push(Action::Send(
                c,
                ToClient::Failed {
                    reason: reason.clone(),
                },
            ));
        }
        out.push(Action::Report(Report::CollectiveFailed {
            reason: reason.clone(),
        }));
        self.broken = Some(reason);
    }
}

#[cfg(test)]
#[path = "coord_tests.rs"]
mod tests;
