//! The launcher side of the TCP bootstrap: a listener and a thread per connection, all feeding
//! one [`Coordinator`] behind a mutex. Not a hot path: a job makes a handful of calls per rank.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use crate::coord::{Action, ConnId, Coordinator, Report};
use crate::error::{ProtoError, ServerError};
use crate::proto::{self, ToClient};

/// A peer must present its hello this soon after connecting, or it is dropped.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A peer that does not read its replies for this long is dropped instead of stalling others.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

struct State {
    coord: Coordinator,
    conns: HashMap<ConnId, TcpStream>,
    next_id: ConnId,
    /// Called under the state lock, in order, before any reply that follows from the report
    /// is written: the launcher learns of a departure before the failure it causes.
    on_report: Box<dyn Fn(Report) + Send>,
}

/// The launcher's bootstrap server. Its threads live until the process exits.
pub struct BootstrapServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic in one connection thread must not take the whole job's bootstrap down; the state
    // is updated in single steps, so it stays consistent.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl BootstrapServer {
    /// Listens on `bind` (port 0 picks a free port) for a job of `size` ranks and `num_hosts`
    /// remote agents; `on_report` receives every [`Report`] (it must not block).
    pub fn start(
        bind: SocketAddr,
        size: u32,
        num_hosts: u32,
        job_key: u64,
        on_report: impl Fn(Report) + Send + 'static,
    ) -> Result<BootstrapServer, ServerError> {
        let listener = TcpListener::bind(bind).map_err(|source| ServerError::Bind {
            addr: bind.to_string(),
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: bind.to_string(),
            source,
        })?;
        let state = Arc::new(Mutex::new(State {
            coord: Coordinator::new(size, num_hosts, job_key),
            conns: HashMap::new(),
            next_id: 1,
            on_report: Box::new(on_report),
        }));
        let st = Arc::clone(&state);
        thread::Builder::new()
            .name("bootstrap-accept".into())
            .spawn(move || accept_loop(listener, st))
            .map_err(|source| ServerError::Thread { source })?;
        Ok(BootstrapServer { addr, state })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Tells every connected agent to terminate its ranks.
    pub fn kill_agents(&self) {
        let mut st = lock(&self.state);
        let conns = st.coord.agent_conns();
        let actions: Vec<Action> = conns
            .into_iter()
            .map(|c| Action::Send(c, ToClient::Kill))
            .collect();
        apply(&mut st, actions);
    }
}

fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let Ok(writer) = stream.try_clone() else {
            continue;
        };
        let id = {
            let mut st = lock(&state);
            let id = st.next_id;
            st.next_id += 1;
            st.conns.insert(id, writer);
            st.coord.on_connect(id);
            id
        };
        let st = Arc::clone(&state);
        let spawned = thread::Builder::new()
            .name(format!("bootstrap-conn-{id}"))
            .spawn(move || conn_loop(id, stream, st));
        if spawned.is_err() {
            let mut st = lock(&state);
            if let Some(s) = st.conns.remove(&id) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

enum ReadEnd {
    Closed,
    Bad(ProtoError),
}

fn read_frame(stream: &mut TcpStream) -> Result<Vec<u8>, ReadEnd> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(|_| ReadEnd::Closed)?;
    let n = proto::frame_len(&len).map_err(ReadEnd::Bad)?.unwrap_or(0);
    let mut body = vec![0u8; n];
    stream.read_exact(&mut body).map_err(|_| ReadEnd::Closed)?;
    Ok(body)
}

fn conn_loop(id: ConnId, mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let _ = stream.set_read_timeout(Some(HELLO_TIMEOUT));
    let mut first = true;
    loop {
        let msg = match read_frame(&mut stream).map(|b| proto::decode_to_server(&b)) {
            Ok(Ok(msg)) => msg,
            Ok(Err(e)) | Err(ReadEnd::Bad(e)) => {
                let st = lock(&state);
                let what = format!("connection {id} sent a malformed frame: {e}");
                (st.on_report)(Report::Misbehaved { what });
                break;
            }
            Err(ReadEnd::Closed) => break,
        };
        if first {
            // Authenticated peers may stay silent for the whole run (a rank between
            // collectives), so the hello deadline applies to the first frame only.
            first = false;
            let _ = stream.set_read_timeout(None);
        }
        let mut st = lock(&state);
        let mut actions = Vec::new();
        st.coord.on_message(id, msg, &mut actions);
        apply(&mut st, actions);
    }
    let mut st = lock(&state);
    let mut actions = Vec::new();
    st.coord.on_disconnect(id, &mut actions);
    actions.push(Action::Close(id));
    apply(&mut st, actions);
}

fn apply(st: &mut State, actions: Vec<Action>) {
    for a in actions {
        match a {
            Action::Send(c, msg) => {
                let frame = proto::encode_to_client(&msg);
                let failed = match st.conns.get_mut(&c) {
                    Some(s) => s.write_all(&frame).is_err(),
                    None => false,
                };
                if failed {
                    // The reader thread sees the shutdown and reports the disconnect.
                    if let Some(s) = st.conns.remove(&c) {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                }
            }
            Action::Close(c) => {
                if let Some(s) = st.conns.remove(&c) {
                    let _ = s.shutdown(Shutdown::Both);
                }
            }
            Action::Report(r) => (st.on_report)(r),
        }
    }
}
