//! The job behind the C ABI, in safe code: the client, the extended API once the segment is
//! bound, every rank's segment address, the memory Long AMs may land in, and the tables that
//! turn C integers (handles) into Rust objects. `ffi` turns raw pointers into the slices and
//! regions these functions take.

use std::cell::RefCell;
use std::sync::{Mutex, OnceLock, RwLock};

use rgasnet::{AttachSpec, Category, Client, Handler, OpenHandlerFn, SegmentSpec, MAX_MEDIUM};
use rgasnet_extended::{Extended, NbHandle, Nbi, PendingExtended};
use rgasnet_portals::Region;

use crate::status::*;

/// Most 32-bit arguments of an AM.
pub const RGASNET_AM_MAX_ARGS: usize = 16;
/// Largest Medium payload (`rgasnet::MAX_MEDIUM`).
pub const RGASNET_AM_MAX_MEDIUM: usize = 65_000;
const _: () = assert!(RGASNET_AM_MAX_MEDIUM == MAX_MEDIUM);
/// First handler index rgasnet keeps for itself (the extended API's and the Long carrier).
pub const RGASNET_RESERVED_FIRST: u8 = 16;
/// Last handler index rgasnet keeps for itself.
pub const RGASNET_RESERVED_LAST: u8 = 20;
/// The carrier of Long AMs: a Medium whose body starts with a [`LONG_HEADER`]-byte header.
const H_LONG: u8 = 19;
/// The carrier of small Mediums: a Short whose first argument says the C handler, the
/// argument count and the payload length, followed by the arguments, then the payload packed
/// into arguments (little-endian). Over the network a Short travels as an immediate message,
/// which costs less than a Medium's put into a receive block (GASNet's `testam`, Medium of 8
/// bytes, round trip: see the README).
const H_SMALL_MEDIUM: u8 = 20;
/// Long header: destination address (8 bytes, little-endian), the C handler index, padding
/// to keep the data 8-byte aligned.
pub(crate) const LONG_HEADER: usize = 16;
/// Largest Long payload: a Long travels with its header (a carried payload, copied to its
/// destination at the target before the handler runs, as GASNet's udp-conduit does).
pub const RGASNET_AM_MAX_LONG: usize = 64_984;
const _: () = assert!(RGASNET_AM_MAX_LONG == MAX_MEDIUM - LONG_HEADER);

/// Which implicit-handle operations a sync waits for.
pub const RGASNET_SYNC_PUTS: i32 = 1;
/// Gets only.
pub const RGASNET_SYNC_GETS: i32 = 2;
/// Puts and gets.
pub const RGASNET_SYNC_ALL: i32 = 3;

/// Smallest blocking put or get that leaves from / lands in the caller's own segment in place.
const IN_PLACE_MIN: usize = 4096;

/// The handle of an explicit-handle operation that completed at once.
pub const RGASNET_HANDLE_DONE: u64 = 0;

/// Everything one process's job holds.
pub(crate) struct Job {
    pub(crate) client: Client,
    am: OnceLock<Am>,
}

/// The AM layer and what follows it.
struct Am {
    pending: Mutex<Option<PendingExtended>>,
    ext: OnceLock<Extended>,
    /// Every rank's bound segment: (address in its process, length).
    segments: OnceLock<Vec<(u64, u64)>>,
    /// Memory of this process that Longs may land in: (address, length).
    served: RwLock<Vec<(u64, u64)>>,
    handles: Mutex<HandleTable>,
}

static JOB: OnceLock<Job> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these locks leaves consistent data (every update is one store).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Joins the job (once; later calls succeed at once). rgasnet's own shared-memory path is
/// off: the runtime above (GASNet-EX's PSHM) serves node peers, and only one layer may
/// govern a pair of ranks. The network path still reaches every rank.
pub(crate) fn init() -> Result<(), CError> {
    let _g = lock(&INIT);
    if JOB.get().is_some() {
        return Ok(());
    }
    let mut config = rgasnet::config::Config::from_env()
        .map_err(|e| CError::new(RGASNET_ERR_BAD_ARG, format!("rgasnet_init: {e}")))?;
    config.pshm = false;
    let client = Client::init_with_config(config)?;
    let _ = JOB.set(Job {
        client,
        am: OnceLock::new(),
    });
    Ok(())
}

/// The job, or `NOT_INIT` naming `call`.
pub(crate) fn job(call: &str) -> Result<&'static Job, CError> {
    JOB.get().ok_or_else(|| {
        CError::new(
            RGASNET_ERR_NOT_INIT,
            format!("{call}: rgasnet_init has not been called (or failed)"),
        )
    })
}

/// The job if there is one (for exit).
pub(crate) fn job_if_any() -> Option<&'static Job> {
    JOB.get()
}

impl Job {
    fn am(&self, call: &str) -> Result<&Am, CError> {
        self.am.get().ok_or_else(|| {
            CError::new(
                RGASNET_ERR_NOT_INIT,
                format!("{call}: rgasnet_am_attach has not been called (or failed)"),
            )
        })
    }

    /// The extended API, once the segment is bound.
    fn ext(&self, call: &str) -> Result<&Extended, CError> {
        self.am(call)?.ext.get().ok_or_else(|| {
            CError::new(
                RGASNET_ERR_NOT_INIT,
                format!("{call}: rgasnet_segment_bind has not been called (or failed)"),
            )
        })
    }

    /// Collective: sets up the AM layer; `open` gets every AM to a C handler, `long` is the
    /// carrier of Longs.
    pub(crate) fn am_attach(
        &self,
        open: OpenHandlerFn,
        long: Handler,
        small_medium: Handler,
    ) -> Result<(), CError> {
        if self.am.get().is_some() {
            return Err(CError::new(
                RGASNET_ERR_BAD_ARG,
                "rgasnet_am_attach: already attached",
            ));
        }
        let (pending, _) = Extended::attach_later(
            &self.client,
            AttachSpec {
                segment: SegmentSpec::Later,
                internal: vec![long.at(H_LONG), small_medium.at(H_SMALL_MEDIUM)],
                handlers: Vec::new(),
                open: Some(open),
            },
        )?;
        let _ = self.am.set(Am {
            pending: Mutex::new(Some(pending)),
            ext: OnceLock::new(),
            segments: OnceLock::new(),
            served: RwLock::new(Vec::new()),
            handles: Mutex::new(HandleTable::default()),
        });
        Ok(())
    }

    /// Collective: serves `region` (this process's memory at `addr`) and learns every
    /// rank's segment.
    pub(crate) fn segment_bind(&self, region: Region, addr: u64) -> Result<(), CError> {
        const CALL: &str = "rgasnet_segment_bind";
        let am = self.am(CALL)?;
        let len = region.len() as u64;
        let Some(pending) = lock(&am.pending).take() else {
            return Err(CError::new(
                RGASNET_ERR_BAD_ARG,
                format!("{CALL}: a segment is already bound (once per job)"),
            ));
        };
        let ext = pending.bind_segment(region)?;
        let mut mine = [0u8; 16];
        mine[..8].copy_from_slice(&addr.to_le_bytes());
        mine[8..].copy_from_slice(&len.to_le_bytes());
        let all = self.client.bootstrap().allgather(&mine)?;
        let mut segments = Vec::with_capacity(all.len());
        for (rank, b) in all.iter().enumerate() {
            let (Some(a), Some(l)) = (word(b, 0), word(b, 8)) else {
                return Err(CError::new(
                    RGASNET_ERR_BOOTSTRAP,
                    format!("{CALL}: rank {rank} published a malformed segment"),
                ));
            };
            segments.push((a, l));
        }
        let _ = am.segments.set(segments);
        let _ = am.ext.set(ext);
        self.serve(addr, len)?;
        Ok(())
    }

    /// Rank `rank`'s bound segment.
    pub(crate) fn segment_of(&self, rank: u32) -> Result<(u64, u64), CError> {
        const CALL: &str = "rgasnet_segment_query";
        let segs = self.segments(CALL)?;
        segs.get(rank as usize)
            .copied()
            .ok_or_else(|| bad_rank(CALL, rank, segs.len()))
    }

    /// Every rank's bound segment, or `NOT_INIT` naming `call`.
    fn segments(&self, call: &str) -> Result<&[(u64, u64)], CError> {
        let am = self.am(call)?;
        am.segments.get().map(Vec::as_slice).ok_or_else(|| {
            CError::new(
                RGASNET_ERR_NOT_INIT,
                format!("{call}: rgasnet_segment_bind has not been called"),
            )
        })
    }

    /// Lets Longs land in `[addr, addr + len)` of this process.
    pub(crate) fn serve(&self, addr: u64, len: u64) -> Result<(), CError> {
        let am = self.am("rgasnet_am_serve_memory")?;
        if addr.checked_add(len).is_none() {
            return Err(CError::new(
                RGASNET_ERR_BAD_ARG,
                "rgasnet_am_serve_memory: the range wraps around the address space",
            ));
        }
        am.served
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((addr, len));
        Ok(())
    }

    /// Whether a Long of `len` bytes may land at `addr` of this process.
    pub(crate) fn may_land(&self, addr: u64, len: u64) -> bool {
        let Some(am) = self.am.get() else {
            return false;
        };
        let served = am.served.read().unwrap_or_else(|p| p.into_inner());
        served.iter().any(|&(a, l)| inside(addr, len, a, l))
    }

    /// Sends `msg` as a request to `rank`.
    pub(crate) fn request(
        &self,
        call: &'static str,
        rank: u32,
        msg: AmMessage<'_>,
    ) -> Result<(), CError> {
        self.am(call)?;
        check_handler(call, msg.handler)?;
        let c = &self.client;
        let (h, a, p) = (msg.handler, msg.args, msg.payload);
        match msg.category {
            Category::Short => c.am_request_short(rank, h, a)?,
            Category::Medium => match pack_small_medium(h, a, p) {
                Some((words, n)) => c.am_request_short(rank, H_SMALL_MEDIUM, &words[..n])?,
                None => c.am_request_medium(rank, h, a, p)?,
            },
            Category::Long => with_long_body(call, h, p, msg.dest, |body| {
                c.am_request_medium(rank, H_LONG, a, body)
            })?,
        }
        Ok(())
    }

    /// Progress without blocking.
    pub(crate) fn poll(&self) -> Result<(), CError> {
        const CALL: &str = "rgasnet_poll";
        self.am(CALL)?;
        // The AM layer's poll drives the whole network interface; the extended API's
        // completions are taken by the waits and tests of their handles, so a second pass
        // through the interface (`Extended::poll`) would only cost the caller's spin loop.
        self.client.poll()?;
        Ok(())
    }

    /// `rank`'s segment offset of `[addr, addr + len)`, checked against its bound segment.
    fn offset(&self, call: &str, rank: u32, addr: u64, len: usize) -> Result<u64, CError> {
        let segs = self.segments(call)?;
        let &(base, seg_len) = segs
            .get(rank as usize)
            .ok_or_else(|| bad_rank(call, rank, segs.len()))?;
        if !inside(addr, len as u64, base, seg_len) {
            return Err(CError::new(
                RGASNET_ERR_OUT_OF_SEGMENT,
                format!(
                    "{call}: {len} bytes at {addr:#x} are outside rank {rank}'s segment [{base:#x}, {:#x})",
                    base + seg_len
                ),
            ));
        }
        Ok(addr - base)
    }

    /// The offset in this rank's own bound segment of the `len` bytes at `local` (a buffer
    /// of this process), if they lie inside it: such a put leaves from the segment in place
    /// and such a get lands there directly, with no copy through a bounce buffer (GASNet's
    /// benchmarks, like most PGAS programs, move data between segments).
    fn own_segment_offset(&self, local: *const u8, len: usize) -> Option<u64> {
        // A small transfer is copied anyway (into the message, out of the reply): the
        // segment path only saves the copies of large ones.
        if len < IN_PLACE_MIN {
            return None;
        }
        let am = self.am.get()?;
        let &(base, seg_len) = am.segments.get()?.get(self.client.rank() as usize)?;
        let at = local as u64;
        inside(at, len as u64, base, seg_len).then(|| at - base)
    }

    /// Blocking put.
    pub(crate) fn put(&self, rank: u32, addr: u64, src: &[u8]) -> Result<(), CError> {
        const CALL: &str = "rgasnet_put";
        let off = self.offset(CALL, rank, addr, src.len())?;
        let ext = self.ext(CALL)?;
        match self.own_segment_offset(src.as_ptr(), src.len()) {
            Some(local) if rank != self.client.rank() => {
                ext.put_from_segment(rank, off, local, src.len() as u64)?
            }
            _ => ext.put_bulk(rank, off, src)?,
        }
        Ok(())
    }

    /// Blocking get into `len` bytes at `local` when they lie in this rank's own bound
    /// segment: the reply lands there directly. `None` (nothing done) for any other
    /// destination, which then goes through [`Job::get`]. Takes the address, not a slice: the
    /// engine writes that memory through the segment while this runs.
    pub(crate) fn get_to_own_segment(
        &self,
        rank: u32,
        addr: u64,
        local: u64,
        len: usize,
    ) -> Option<Result<(), CError>> {
        const CALL: &str = "rgasnet_get";
        let (at, off) = match self.own_segment_get(CALL, rank, addr, local, len)? {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        Some((|| {
            self.ext(CALL)?.get_to_segment(at, rank, off, len as u64)?;
            Ok(())
        })())
    }

    /// For a get of `len` bytes from (`rank`, `addr`) into `local`: the offsets in this rank's
    /// own segment and in `rank`'s, when `local` lies in the former and `rank` is another
    /// rank; `None` for any other get (it takes the general path).
    fn own_segment_get(
        &self,
        call: &str,
        rank: u32,
        addr: u64,
        local: u64,
        len: usize,
    ) -> Option<Result<(u64, u64), CError>> {
        let at = self.own_segment_offset(local as *const u8, len)?;
        if rank == self.client.rank() {
            return None;
        }
        Some(self.offset(call, rank, addr, len).map(|off| (at, off)))
    }

    /// [`Job::get_to_own_segment`] with an explicit handle: a large get into this rank's own
    /// bound segment lands there directly, with no landing buffer to map and copy out of
    /// (GASNet's nb and nbi gets into the segment, e.g. testlarge's GetNBI flood).
    pub(crate) fn get_nb_to_own_segment(
        &'static self,
        rank: u32,
        addr: u64,
        local: u64,
        len: usize,
    ) -> Option<Result<u64, CError>> {
        const CALL: &str = "rgasnet_get_nb";
        let (at, off) = match self.own_segment_get(CALL, rank, addr, local, len)? {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        Some((|| {
            let h = self
                .ext(CALL)?
                .get_nb_to_segment(at, rank, off, len as u64)?;
            self.keep(CALL, h)
        })())
    }

    /// Blocking get.
    pub(crate) fn get(&self, dest: &mut [u8], rank: u32, addr: u64) -> Result<(), CError> {
        const CALL: &str = "rgasnet_get";
        let off = self.offset(CALL, rank, addr, dest.len())?;
        self.ext(CALL)?.get_bulk(dest, rank, off)?;
        Ok(())
    }

    /// Explicit-handle put; the source is copied before this returns.
    pub(crate) fn put_nb(&'static self, rank: u32, addr: u64, src: &[u8]) -> Result<u64, CError> {
        const CALL: &str = "rgasnet_put_nb";
        let off = self.offset(CALL, rank, addr, src.len())?;
        let h = self.ext(CALL)?.put_nb(rank, off, src)?;
        self.keep(CALL, h)
    }

    /// Explicit-handle get into `dest`, which the caller leaves alone until completion.
    pub(crate) fn get_nb(
        &'static self,
        dest: &'static mut [u8],
        rank: u32,
        addr: u64,
    ) -> Result<u64, CError> {
        const CALL: &str = "rgasnet_get_nb";
        let off = self.offset(CALL, rank, addr, dest.len())?;
        let h = self.ext(CALL)?.get_nb(dest, rank, off)?;
        self.keep(CALL, h)
    }

    fn keep(&self, call: &str, h: NbHandle<'static>) -> Result<u64, CError> {
        let am = self.am(call)?;
        Ok(lock(&am.handles).insert(h))
    }

    /// Completes handle `id`: `Ok(true)` when done (the handle is gone), `Ok(false)` when
    /// not yet (only with `block == false`).
    pub(crate) fn complete(&self, call: &str, id: u64, block: bool) -> Result<bool, CError> {
        if id == RGASNET_HANDLE_DONE {
            return Ok(true);
        }
        let am = self.am(call)?;
        // Taken out while it is waited for: a wait polls, and a handler must never find the
        // table locked.
        let Some((slot, mut h)) = lock(&am.handles).take(id) else {
            return Err(CError::new(
                RGASNET_ERR_BAD_ARG,
                format!(
                    "{call}: {id:#x} is not a pending handle (never issued, or already completed)"
                ),
            ));
        };
        if block {
            h.wait()?;
            lock(&am.handles).release(slot);
            return Ok(true);
        }
        match h.try_wait() {
            Ok(true) => {
                lock(&am.handles).release(slot);
                Ok(true)
            }
            Ok(false) => {
                lock(&am.handles).put_back(slot, h);
                Ok(false)
            }
            Err(e) => {
                lock(&am.handles).release(slot);
                Err(e.into())
            }
        }
    }

    /// Implicit-handle put (this thread's context).
    pub(crate) fn put_nbi(&'static self, rank: u32, addr: u64, src: &[u8]) -> Result<(), CError> {
        const CALL: &str = "rgasnet_put_nbi";
        let off = self.offset(CALL, rank, addr, src.len())?;
        let ext = self.ext(CALL)?;
        with_nbi(CALL, ext, |nbi| nbi.put_nbi(rank, off, src))
    }

    /// Implicit-handle get into `dest`, which the caller leaves alone until the sync.
    pub(crate) fn get_nbi(
        &'static self,
        dest: &'static mut [u8],
        rank: u32,
        addr: u64,
    ) -> Result<(), CError> {
        const CALL: &str = "rgasnet_get_nbi";
        let off = self.offset(CALL, rank, addr, dest.len())?;
        let ext = self.ext(CALL)?;
        with_nbi(CALL, ext, |nbi| nbi.get_nbi(dest, rank, off))
    }

    /// Syncs this thread's implicit operations of kind `which`.
    pub(crate) fn sync_nbi(&'static self, which: i32, block: bool) -> Result<bool, CError> {
        let call = if block {
            "rgasnet_sync_nbi"
        } else {
            "rgasnet_try_sync_nbi"
        };
        if !(RGASNET_SYNC_PUTS..=RGASNET_SYNC_ALL).contains(&which) {
            return Err(CError::new(
                RGASNET_ERR_BAD_ARG,
                format!("{call}: {which} is not RGASNET_SYNC_PUTS, _GETS or _ALL"),
            ));
        }
        let ext = self.ext(call)?;
        let mut done = false;
        with_nbi(call, ext, |nbi| {
            done = match (which, block) {
                (RGASNET_SYNC_PUTS, true) => nbi.sync_nbi_puts().map(|()| true)?,
                (RGASNET_SYNC_GETS, true) => nbi.sync_nbi_gets().map(|()| true)?,
                (_, true) => nbi.sync_nbi_all().map(|()| true)?,
                (RGASNET_SYNC_PUTS, false) => nbi.try_sync_nbi_puts()?,
                (RGASNET_SYNC_GETS, false) => nbi.try_sync_nbi_gets()?,
                (_, false) => nbi.try_sync_nbi_all()?,
            };
            Ok(())
        })?;
        Ok(done)
    }
}

/// Refuses rgasnet's own handler indices.
pub(crate) fn check_handler(call: &str, handler: u8) -> Result<(), CError> {
    if (RGASNET_RESERVED_FIRST..=RGASNET_RESERVED_LAST).contains(&handler) {
        return Err(CError::new(
            RGASNET_ERR_BAD_ARG,
            format!(
                "{call}: handler index {handler} is reserved by rgasnet ({RGASNET_RESERVED_FIRST}-{RGASNET_RESERVED_LAST}); use another"
            ),
        ));
    }
    Ok(())
}

/// Runs `send` with the body of a Long: its header, then `data`.
pub(crate) fn with_long_body<E>(
    call: &str,
    handler: u8,
    data: &[u8],
    dest: u64,
    send: impl FnOnce(&[u8]) -> Result<(), E>,
) -> Result<(), CError>
where
    CError: From<E>,
{
    if data.len() > RGASNET_AM_MAX_LONG {
        return Err(CError::new(
            RGASNET_ERR_TOO_LARGE,
            format!(
                "{call}: a Long of {} bytes exceeds rgasnet_am_max_long() = {RGASNET_AM_MAX_LONG}",
                data.len()
            ),
        ));
    }
    thread_local! {
        static BODY: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    let fill = |body: &mut Vec<u8>| {
        body.clear();
        body.extend_from_slice(&dest.to_le_bytes());
        body.push(handler);
        body.resize(LONG_HEADER, 0);
        body.extend_from_slice(data);
    };
    BODY.with(|cell| match cell.try_borrow_mut() {
        Ok(mut body) => {
            fill(&mut body);
            send(&body).map_err(CError::from)
        }
        // A reply from a handler that runs while this thread's request waits for room.
        Err(_) => {
            let mut body = Vec::new();
            fill(&mut body);
            send(&body).map_err(CError::from)
        }
    })
}

/// A Medium packed into the arguments of a Short (see [`H_SMALL_MEDIUM`]), when its arguments
/// and payload fit: the words and how many are used.
fn pack_small_medium(handler: u8, args: &[u32], payload: &[u8]) -> Option<([u32; 16], usize)> {
    let n = 1 + args.len() + payload.len().div_ceil(4);
    if n > RGASNET_AM_MAX_ARGS {
        return None;
    }
    let mut words = [0u32; 16];
    words[0] = u32::from(handler) | (args.len() as u32) << 8 | (payload.len() as u32) << 16;
    words[1..=args.len()].copy_from_slice(args);
    for (w, chunk) in words[1 + args.len()..n].iter_mut().zip(payload.chunks(4)) {
        let mut b = [0u8; 4];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u32::from_le_bytes(b);
    }
    Some((words, n))
}

/// A small Medium unpacked from a carrier's arguments: the C handler, its arguments and its
/// payload (in `buf`); `None` for words no sender packs.
pub(crate) fn unpack_small_medium<'a>(
    words: &'a [u32],
    buf: &'a mut [u8; 64],
) -> Option<(u8, &'a [u32], &'a [u8])> {
    let head = *words.first()?;
    let handler = (head & 0xff) as u8;
    let nargs = ((head >> 8) & 0xff) as usize;
    let len = (head >> 16) as usize;
    let args = words.get(1..1 + nargs)?;
    let packed = words.get(1 + nargs..1 + nargs + len.div_ceil(4))?;
    for (chunk, w) in buf.chunks_mut(4).zip(packed) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    Some((handler, args, buf.get(..len)?))
}

/// A Long's header and data, or what is wrong with it.
pub(crate) fn parse_long(body: &[u8]) -> Option<(u64, u8, &[u8])> {
    let dest = word(body, 0)?;
    let handler = *body.get(8)?;
    Some((dest, handler, body.get(LONG_HEADER..)?))
}

fn word(b: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

fn inside(addr: u64, len: u64, base: u64, seg_len: u64) -> bool {
    addr >= base
        && addr
            .checked_add(len)
            .is_some_and(|end| end <= base.saturating_add(seg_len))
}

fn bad_rank(call: &str, rank: u32, size: usize) -> CError {
    CError::new(
        RGASNET_ERR_BAD_RANK,
        format!("{call}: rank {rank} is not in this job of {size} ranks"),
    )
}

thread_local! {
    /// This thread's implicit-handle context (GASNet's nbi state is per thread).
    static NBI: RefCell<Option<Nbi<'static>>> = const { RefCell::new(None) };
}

fn with_nbi(
    call: &str,
    ext: &'static Extended,
    f: impl FnOnce(&mut Nbi<'static>) -> Result<(), rgasnet_extended::ExtError>,
) -> Result<(), CError> {
    NBI.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Err(CError::new(
                RGASNET_ERR_IN_HANDLER,
                format!(
                    "{call}: called from a handler while this thread syncs its implicit operations"
                ),
            ));
        };
        let nbi = slot.get_or_insert_with(|| ext.nbi());
        f(nbi).map_err(CError::from)
    })
}

/// Pending explicit handles by id: `(generation << 32) | (slot + 1)`, so a stale or forged
/// id is refused instead of completing another operation.
#[derive(Default)]
struct HandleTable {
    slots: Vec<(u32, Option<NbHandle<'static>>, bool)>,
    free: Vec<usize>,
}

impl HandleTable {
    fn insert(&mut self, h: NbHandle<'static>) -> u64 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push((0, None, false));
                self.slots.len() - 1
            }
        };
        let entry = &mut self.slots[slot];
        entry.0 = entry.0.wrapping_add(1);
        entry.1 = Some(h);
        entry.2 = true;
        (u64::from(entry.0) << 32) | (slot as u64 + 1)
    }

    /// Takes the handle out, keeping its slot reserved.
    fn take(&mut self, id: u64) -> Option<(usize, NbHandle<'static>)> {
        let slot = usize::try_from((id & 0xffff_ffff).checked_sub(1)?).ok()?;
        let generation = (id >> 32) as u32;
        let entry = self.slots.get_mut(slot)?;
        if entry.0 != generation || !entry.2 {
            return None;
        }
        let h = entry.1.take()?;
        Some((slot, h))
    }

    fn put_back(&mut self, slot: usize, h: NbHandle<'static>) {
        if let Some(entry) = self.slots.get_mut(slot) {
            entry.1 = Some(h);
        }
    }

    fn release(&mut self, slot: usize) {
        if let Some(entry) = self.slots.get_mut(slot) {
            entry.1 = None;
            entry.2 = false;
            self.free.push(slot);
        }
    }
}

/// An active message to send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AmMessage<'a> {
    pub(crate) handler: u8,
    pub(crate) category: Category,
    pub(crate) args: &'a [u32],
    /// Empty for a Short.
    pub(crate) payload: &'a [u8],
    /// Long: the address the payload lands at in the target process.
    pub(crate) dest: u64,
}

/// A handler's reply `msg` through `token`.
pub(crate) fn reply(
    call: &'static str,
    token: &rgasnet::Token<'_>,
    msg: AmMessage<'_>,
) -> Result<(), CError> {
    check_handler(call, msg.handler)?;
    let (h, a, p) = (msg.handler, msg.args, msg.payload);
    match msg.category {
        Category::Short => token.reply_short(h, a)?,
        Category::Medium => match pack_small_medium(h, a, p) {
            Some((words, n)) => token.reply_short(H_SMALL_MEDIUM, &words[..n])?,
            None => token.reply_medium(h, a, p)?,
        },
        Category::Long => with_long_body(call, h, p, msg.dest, |body| {
            token.reply_medium(H_LONG, a, body)
        })?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_mediums_round_trip_through_short_arguments() {
        for nargs in 0..=15usize {
            for len in 0..=64usize {
                let args: Vec<u32> = (0..nargs as u32).map(|i| 0xdead_0000 + i).collect();
                let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
                let packed = pack_small_medium(201, &args, &payload);
                let fits = 1 + nargs + len.div_ceil(4) <= 16;
                assert_eq!(packed.is_some(), fits, "nargs {nargs} len {len}");
                let Some((words, n)) = packed else { continue };
                let mut buf = [0u8; 64];
                let (h, a, p) = unpack_small_medium(&words[..n], &mut buf).expect("unpacks");
                assert_eq!((h, a, p), (201, &args[..], &payload[..]));
            }
        }
    }

    #[test]
    fn malformed_small_mediums_are_refused() {
        let mut buf = [0u8; 64];
        assert!(unpack_small_medium(&[], &mut buf).is_none());
        // Claims 3 arguments and 8 bytes but carries 2 words.
        assert!(unpack_small_medium(&[7 | 3 << 8 | 8 << 16, 1], &mut buf).is_none());
        // Claims more payload than any Short can carry.
        let mut words = [0u32; 16];
        words[0] = 7 | 200 << 16;
        assert!(unpack_small_medium(&words, &mut buf).is_none());
    }
}
