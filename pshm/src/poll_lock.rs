//! [`PollLock`]: the consumer side of a process's queues shared by its threads (a child of
//! the `queue` module, whose unsafe code it shares the rules of).

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

/// The consumer side of a process's queues (its [`crate::Receiver`]), shared by the threads
/// of the process: whichever polls takes it, and a thread that finds it taken leaves the
/// draining to the holder instead of waiting.
///
/// `std::sync::Mutex` would do, but its release is a locked exchange, since it must learn
/// whether a waiter sleeps; nothing ever sleeps on this lock, so its release is a plain
/// store. On the polling thread that release lies between a reply's handler and the program's
/// next request: with the AM layer's handled-count bumped under it without a locked add too,
/// the shared-memory AM Short round trip measured 1-4 % shorter (`benches/perf/am-medium.md`,
/// stop 61). A holder that unwinds releases it (the guard's `Drop`): the queues stay
/// consistent, as a handler's message is released as it unwinds.
pub struct PollLock<T> {
    taken: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `PollGuard`, and at most one exists at a time
// (`try_lock`'s compare-and-swap from false to true), so sharing the lock between threads
// hands `&mut T` to one thread at a time, which `T: Send` allows.
unsafe impl<T: Send> Sync for PollLock<T> {}

impl<T> PollLock<T> {
    /// A lock holding `value`, free.
    pub fn new(value: T) -> PollLock<T> {
        PollLock {
            taken: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock if it is free; `None` while another thread holds it.
    #[inline]
    pub fn try_lock(&self) -> Option<PollGuard<'_, T>> {
        // Acquire on success: pairs with the Release of the last holder's release, so its
        // writes to the value happen before this holder's accesses.
        self.taken
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| PollGuard {
                lock: self,
                _lends: PhantomData,
            })
    }

    /// Takes the lock, yielding the CPU between tries while another thread holds it. Holders
    /// are short: a poller runs handlers, which may not wait, and a thread asleep in
    /// [`crate::Receiver::wait`] holds it for the timeout it gave (the conduit's waits give
    /// tens of microseconds).
    pub fn lock(&self) -> PollGuard<'_, T> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            std::thread::yield_now();
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for PollLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.try_lock() {
            Some(guard) => f.debug_tuple("PollLock").field(&*guard).finish(),
            None => f.write_str("PollLock(<taken>)"),
        }
    }
}

/// The holder's access to a [`PollLock`]'s value; releases the lock when dropped.
///
/// A guard is shared between threads only where its value may be (it lends `&T`):
///
/// ```compile_fail
/// fn shared<T: Sync>() {}
/// shared::<rgasnet_pshm::PollGuard<'static, std::cell::Cell<u32>>>();
/// ```
pub struct PollGuard<'a, T> {
    lock: &'a PollLock<T>,
    /// The guard lends `&mut T`, so it is `Sync` only where `T` is (shared, it hands `&T` to
    /// several threads) and `Send` where `T` is, as `&mut T` itself: without this, the
    /// reference to the lock alone would make it `Sync` for any `T: Send`.
    _lends: PhantomData<&'a mut T>,
}

impl<T> std::ops::Deref for PollGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `PollLock`'s `Sync`), and it lives within
        // the lock's borrow, so the value is valid and nothing else accesses it meanwhile.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for PollGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only access through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for PollGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: this holder's accesses to the value happen before the next holder's
        // (its Acquire in `try_lock`). A plain store, not a locked exchange: no waiter sleeps.
        self.lock.taken.store(false, Ordering::Release);
    }
}
