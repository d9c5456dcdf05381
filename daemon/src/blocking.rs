//! Running blocking work (SQLite, file I/O, hashing, git) off the async
//! threads: the one way the daemon does it.
//!
//! A panic in the closure is resumed in the caller, as if the code had run
//! inline: the request that ran it fails the way any panic does, rather
//! than each call site inventing its own `internal` error for it.

/// Runs `f` on tokio's blocking pool and returns what it returns.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(value) => value,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled: only the runtime shutting down cancels a blocking task
        // (one queued, not begun). It drops this task too, but a worker may
        // poll it once more first, woken by that very cancellation: there
        // is nothing to return to, so it waits to be dropped rather than
        // panic on the daemon's way out.
        Err(_) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_closures_value() {
        assert_eq!(blocking(|| 6 * 7).await, 42);
    }

    #[tokio::test]
    async fn a_panic_in_the_closure_reaches_the_caller_with_its_message() {
        let caught = tokio::spawn(blocking(|| -> u8 { panic!("disk on fire") }))
            .await
            .unwrap_err()
            .into_panic();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"disk on fire"));
    }
}
