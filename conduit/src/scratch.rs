//! Per-thread scratch buffers that still work while the thread's locals are being destroyed.
//!
//! The receive and send paths decode and encode through reused per-thread buffers. When the
//! main thread leaves (`main` returned, or `std::process::exit`), its thread-locals are
//! destroyed before the process ends, in an order this crate does not choose, and the client's
//! end ([`crate::finish`]) may still poll then: a buffer already destroyed is replaced by a
//! fresh one for that call instead of panicking.

use std::cell::RefCell;
use std::thread::LocalKey;

/// A per-thread reusable byte buffer.
pub(crate) type Scratch = RefCell<Vec<u8>>;

/// Runs `f` on this thread's buffer `key`, or on a fresh buffer if the thread's locals are
/// already destroyed.
#[inline(always)]
pub(crate) fn with_scratch<R>(key: &'static LocalKey<Scratch>, f: impl FnOnce(&Scratch) -> R) -> R {
    let mut f = Some(f);
    if let Ok(Some(r)) = key.try_with(|buf| f.take().map(|f| f(buf))) {
        return r;
    }
    spare(f)
}

/// The slow path of [`with_scratch`]: the thread's buffer is gone, so `f` (still unused,
/// since `try_with` did not run it) gets a buffer of its own.
#[cold]
#[inline(never)]
fn spare<R>(f: Option<impl FnOnce(&Scratch) -> R>) -> R {
    let buf = RefCell::new(Vec::new());
    match f {
        Some(f) => f(&buf),
        // `try_with` either ran the closure (which took `f` and returned its result) or
        // did not run it at all, so `f` is still here.
        None => unreachable!("a scratch closure ran without returning"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static BUF: Scratch = const { RefCell::new(Vec::new()) };
    }

    /// Runs `with_scratch` on `BUF` from a thread-local's destructor, i.e. after (or while)
    /// `BUF` itself is destroyed, as the client's end does at the main thread's exit.
    struct UsesBufWhenDropped(std::sync::mpsc::Sender<Vec<u8>>);

    impl Drop for UsesBufWhenDropped {
        fn drop(&mut self) {
            let got = with_scratch(&BUF, |b| {
                b.borrow_mut().extend_from_slice(b"late");
                b.borrow().clone()
            });
            let _ = self.0.send(got);
        }
    }

    thread_local! {
        static LATE: RefCell<Option<UsesBufWhenDropped>> = const { RefCell::new(None) };
    }

    #[test]
    fn the_buffer_is_reused_while_alive() {
        with_scratch(&BUF, |b| b.borrow_mut().extend_from_slice(b"ab"));
        let seen = with_scratch(&BUF, |b| b.borrow().clone());
        assert_eq!(seen, b"ab");
    }

    #[test]
    fn a_destroyed_buffer_is_replaced_by_a_fresh_one() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Registered first, so destroyed last (destructors run in reverse order): by then
            // `BUF`, touched after it, is gone.
            LATE.with(|l| *l.borrow_mut() = Some(UsesBufWhenDropped(tx)));
            with_scratch(&BUF, |b| b.borrow_mut().extend_from_slice(b"early"));
        })
        .join()
        .expect("the thread ends without a panic");
        let got = rx.recv().expect("the destructor ran");
        // Destructors run in reverse order of first use (glibc's thread-exit list), so
        // `BUF` was gone and the call got an empty buffer of its own.
        assert_eq!(got, b"late");
    }
}
