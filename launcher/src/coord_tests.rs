//! Sans-IO tests of the coordinator: connections are plain numbers, replies are inspected.

use super::*;

const KEY: u64 = 0xfeed_f00d;

/// A coordinator with `n` ranks connected on connections 0..n (connection id = rank).
fn joined(n: u32) -> Coordinator {
    let mut c = Coordinator::new(n, 0, KEY);
    for r in 0..n {
        let mut out = Vec::new();
        c.on_connect(u64::from(r));
        c.on_message(
            u64::from(r),
            ToServer::HelloRank {
                job_key: KEY,
                rank: r,
            },
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                Action::Send(u64::from(r), ToClient::Welcome),
                Action::Report(Report::RankJoined { rank: r })
            ]
        );
    }
    c
}

fn send(c: &mut Coordinator, conn: u64, msg: ToServer) -> Vec<Action> {
    let mut out = Vec::new();
    c.on_message(conn, msg, &mut out);
    out
}

fn sends(out: &[Action]) -> Vec<(u64, ToClient)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Send(c, m) => Some((*c, m.clone())),
            _ => None,
        })
        .collect()
}

fn failed_conns(out: &[Action]) -> Vec<u64> {
    let mut v: Vec<u64> = sends(out)
        .into_iter()
        .filter(|(_, m)| matches!(m, ToClient::Failed { .. }))
        .map(|(c, _)| c)
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn wrong_key_bad_rank_and_duplicates_are_refused() {
    let mut c = Coordinator::new(2, 1, KEY);
    c.on_connect(10);
    let out = send(
        &mut c,
        10,
        ToServer::HelloRank {
            job_key: KEY ^ 1,
            rank: 0,
        },
    );
    assert_eq!(
        out,
        vec![
            Action::Send(
                10,
                ToClient::Refused {
                    reason: "wrong job key".into()
                }
            ),
            Action::Close(10)
        ]
    );
    c.on_connect(11);
    let out = send(
        &mut c,
        11,
        ToServer::HelloRank {
            job_key: KEY,
            rank: 2,
        },
    );
    assert!(
        matches!(&out[0], Action::Send(11, ToClient::Refused { reason }) if reason.contains("rank 2"))
    );
    c.on_connect(12);
    send(
        &mut c,
        12,
        ToServer::HelloRank {
            job_key: KEY,
            rank: 1,
        },
    );
    c.on_connect(13);
    let out = send(
        &mut c,
        13,
        ToServer::HelloRank {
            job_key: KEY,
            rank: 1,
        },
    );
    assert!(
        matches!(&out[0], Action::Send(13, ToClient::Refused { reason }) if reason.contains("already connected"))
    );
    c.on_connect(14);
    let out = send(
        &mut c,
        14,
        ToServer::HelloAgent {
            job_key: KEY,
            host: 1,
        },
    );
    assert!(matches!(
        &out[0],
        Action::Send(14, ToClient::Refused { .. })
    ));
    // A request before the hello is refused and reported.
    c.on_connect(15);
    let out = send(&mut c, 15, ToServer::Barrier);
    assert!(matches!(
        &out[0],
        Action::Send(15, ToClient::Refused { .. })
    ));
    assert_eq!(out[1], Action::Close(15));
    assert!(matches!(out[2], Action::Report(Report::Misbehaved { .. })));
}

#[test]
fn barrier_completes_only_when_all_arrive() {
    let mut c = joined(3);
    assert!(send(&mut c, 0, ToServer::Barrier).is_empty());
    assert!(send(&mut c, 2, ToServer::Barrier).is_empty());
    let out = send(&mut c, 1, ToServer::Barrier);
    assert_eq!(
        sends(&out),
        vec![
            (0, ToClient::Done),
            (1, ToClient::Done),
            (2, ToClient::Done)
        ]
    );
    assert_eq!(
        out.last(),
        Some(&Action::Report(Report::Phase {
            op: "barrier",
            count: 1
        }))
    );
    // The next barrier is a new generation.
    assert!(send(&mut c, 1, ToServer::Barrier).is_empty());
}

#[test]
fn kv_put_fence_get_and_missing_key() {
    let mut c = joined(2);
    assert!(send(
        &mut c,
        0,
        ToServer::Put {
            key: "a".into(),
            value: vec![1]
        }
    )
    .is_empty());
    assert!(send(
        &mut c,
        1,
        ToServer::Put {
            key: "b".into(),
            value: vec![2, 2]
        }
    )
    .is_empty());
    send(&mut c, 0, ToServer::Fence);
    let out = send(&mut c, 1, ToServer::Fence);
    assert_eq!(sends(&out), vec![(0, ToClient::Done), (1, ToClient::Done)]);
    let out = send(&mut c, 0, ToServer::Get { key: "b".into() });
    assert_eq!(
        sends(&out),
        vec![(
            0,
            ToClient::Value {
                value: Some(vec![2, 2])
            }
        )]
    );
    let out = send(
        &mut c,
        1,
        ToServer::Get {
            key: "nobody".into(),
        },
    );
    assert_eq!(sends(&out), vec![(1, ToClient::Value { value: None })]);
}

#[test]
fn allgather_returns_blobs_in_rank_order() {
    let mut c = joined(3);
    send(&mut c, 2, ToServer::Allgather { data: vec![2, 2] });
    send(&mut c, 0, ToServer::Allgather { data: vec![0, 0] });
    let out = send(&mut c, 1, ToServer::Allgather { data: vec![1, 1] });
    let expect = ToClient::Gathered {
        blobs: vec![vec![0, 0], vec![1, 1], vec![2, 2]],
    };
    assert_eq!(
        sends(&out),
        vec![(0, expect.clone()), (1, expect.clone()), (2, expect)]
    );
}

#[test]
fn allgather_size_mismatch_fails_everyone_who_waits_and_poisons() {
    let mut c = joined(3);
    send(&mut c, 0, ToServer::Allgather { data: vec![0; 4] });
    let out = send(&mut c, 1, ToServer::Allgather { data: vec![0; 8] });
    assert_eq!(failed_conns(&out), vec![0, 1]);
    let reason = match &sends(&out)[0].1 {
        ToClient::Failed { reason } => reason.clone(),
        m => panic!("{m:?}"),
    };
    assert!(
        reason.contains("8-byte") && reason.contains("4-byte"),
        "{reason}"
    );
    // Rank 2 arrives later: it fails at once instead of waiting for ranks that gave up.
    let out = send(&mut c, 2, ToServer::Allgather { data: vec![0; 4] });
    assert_eq!(failed_conns(&out), vec![2]);
}

#[test]
fn different_collectives_fail_instead_of_hanging() {
    let mut c = joined(2);
    send(&mut c, 0, ToServer::Barrier);
    let out = send(&mut c, 1, ToServer::Fence);
    assert_eq!(failed_conns(&out), vec![0, 1]);
}

#[test]
fn broadcast_delivers_root_data_and_checks_roots() {
    let mut c = joined(3);
    send(
        &mut c,
        0,
        ToServer::Broadcast {
            root: 1,
            data: None,
        },
    );
    send(
        &mut c,
        1,
        ToServer::Broadcast {
            root: 1,
            data: Some(vec![7, 8, 9]),
        },
    );
    let out = send(
        &mut c,
        2,
        ToServer::Broadcast {
            root: 1,
            data: None,
        },
    );
    let d = ToClient::Broadcasted {
        data: vec![7, 8, 9],
    };
    assert_eq!(sends(&out), vec![(0, d.clone()), (1, d.clone()), (2, d)]);

    let mut c = joined(2);
    send(
        &mut c,
        0,
        ToServer::Broadcast {
            root: 0,
            data: Some(vec![1]),
        },
    );
    let out = send(
        &mut c,
        1,
        ToServer::Broadcast {
            root: 1,
            data: None,
        },
    );
    assert_eq!(failed_conns(&out), vec![0, 1]);

    let mut c = joined(2);
    let out = send(
        &mut c,
        0,
        ToServer::Broadcast {
            root: 5,
            data: None,
        },
    );
    assert_eq!(failed_conns(&out), vec![0]);
}

#[test]
fn a_rank_leaving_fails_the_waiters() {
    let mut c = joined(3);
    send(&mut c, 0, ToServer::Barrier);
    send(&mut c, 1, ToServer::Barrier);
    let mut out = Vec::new();
    c.on_disconnect(2, &mut out);
    assert_eq!(out[0], Action::Report(Report::RankLeft { rank: 2 }));
    assert_eq!(failed_conns(&out), vec![0, 1]);
    // It cannot come back, and later collectives fail immediately.
    c.on_connect(9);
    let out = send(
        &mut c,
        9,
        ToServer::HelloRank {
            job_key: KEY,
            rank: 2,
        },
    );
    assert!(matches!(&out[0], Action::Send(9, ToClient::Refused { .. })));
    let out = send(&mut c, 0, ToServer::Fence);
    assert_eq!(failed_conns(&out), vec![0]);
}

#[test]
fn single_rank_collectives_complete_at_once() {
    let mut c = joined(1);
    assert_eq!(
        sends(&send(&mut c, 0, ToServer::Barrier)),
        vec![(0, ToClient::Done)]
    );
    assert_eq!(
        sends(&send(&mut c, 0, ToServer::Allgather { data: vec![5] })),
        vec![(
            0,
            ToClient::Gathered {
                blobs: vec![vec![5]]
            }
        )]
    );
}

#[test]
fn abort_and_agent_reports_reach_the_launcher() {
    let mut c = Coordinator::new(4, 2, KEY);
    c.on_connect(1);
    let out = send(
        &mut c,
        1,
        ToServer::HelloAbort {
            job_key: KEY,
            rank: 3,
            code: 7,
        },
    );
    assert_eq!(
        out,
        vec![
            Action::Report(Report::Abort { rank: 3, code: 7 }),
            Action::Send(1, ToClient::AbortAck),
            Action::Close(1)
        ]
    );
    c.on_connect(2);
    let out = send(
        &mut c,
        2,
        ToServer::HelloAbort {
            job_key: 1,
            rank: 3,
            code: 7,
        },
    );
    assert!(matches!(&out[0], Action::Send(2, ToClient::Refused { .. })));

    c.on_connect(5);
    send(
        &mut c,
        5,
        ToServer::HelloAgent {
            job_key: KEY,
            host: 1,
        },
    );
    assert_eq!(c.agent_conns(), vec![5]);
    let out = send(
        &mut c,
        5,
        ToServer::RankExited {
            rank: 2,
            pid: 77,
            end: RankEnd::Signal(9),
        },
    );
    assert_eq!(
        out,
        vec![Action::Report(Report::RankExited {
            host: 1,
            rank: 2,
            pid: 77,
            end: RankEnd::Signal(9)
        })]
    );
    // An agent may not take part in collectives.
    let out = send(&mut c, 5, ToServer::Barrier);
    assert_eq!(out[1], Action::Close(5));
    let mut out = Vec::new();
    c.on_disconnect(5, &mut out);
    assert_eq!(out, vec![Action::Report(Report::AgentLeft { host: 1 })]);
    assert!(c.agent_conns().is_empty());
}
