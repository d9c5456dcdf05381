//! The daemon's one lock-poisoning policy: a lock whose holder panicked is
//! taken over, not passed on as a panic to every later caller.
//!
//! A panic while a `std::sync` lock is held marks it poisoned. Unwrapping
//! that would turn one failed request into a daemon that fails every
//! request touching the same state, until restarted. Taking it over is safe
//! for what the daemon guards this way, and a new lock must keep it so:
//! - maps and slots changed by one whole insert, remove or assignment at a
//!   time (pins, the idle clock, repo locks, watch owners, cached stats,
//!   the verified-file record), so a panic cannot leave half an update;
//! - SQLite connections, whose open transaction rolls back as the panic
//!   unwinds through it (rusqlite's `Transaction` drop), leaving the
//!   connection usable and the database at its last commit.
//!
//! State that a panic could leave half-changed does not belong behind
//! these helpers; it needs its own repair or a lock that panics.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, taking it over if a holder panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `rw`, taking it over if a writer panicked.
pub fn read<T: ?Sized>(rw: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    rw.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `rw`, taking it over if a holder panicked.
pub fn write<T: ?Sized>(rw: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    rw.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_over_with_its_value() {
        let mutex = Mutex::new(7);
        let _ = std::panic::catch_unwind(|| {
            let _held = mutex.lock().unwrap();
            panic!("holder fails");
        });
        assert!(mutex.is_poisoned());
        assert_eq!(*lock(&mutex), 7);
    }

    #[test]
    fn a_rwlock_whose_writer_panicked_still_reads_and_writes() {
        let rw = RwLock::new(vec![1]);
        let _ = std::panic::catch_unwind(|| {
            let _held = rw.write().unwrap();
            panic!("writer fails");
        });
        write(&rw).push(2);
        assert_eq!(*read(&rw), [1, 2]);
    }
}
