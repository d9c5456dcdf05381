//! The clients of one daemon's remotes, one of each kind, kept for the
//! daemon's life: they keep connections open between objects. Built on
//! first use from the daemon's [`Settings`] (and the AWS profile files); a
//! failure is not kept, so fixing a profile file needs no restart. Owned by the daemon's
//! shared state, not the process: two daemons in one process (tests) share
//! no client and no journal. The DRS client and every Indexd client share
//! one connection pool (`drs::Api`), built apart from the DRS client so a
//! bad `DRSD_DRS_SERVERS` does not keep Indexd from working.

use std::sync::{Arc, Mutex};

use crate::settings::{Key, Settings};

use crate::stores::drs::{Api, DrsAuth, DrsClient, DrsError, DrsServers};
use crate::stores::{
    HttpClient, HttpConfig, RemoteError, S3Client, S3Config, S3Credentials, UploadJournal,
};

/// A client built on first use; a failed build leaves the slot empty.
struct Slot<T>(Mutex<Option<Arc<T>>>);

impl<T> Slot<T> {
    fn new() -> Slot<T> {
        Slot(Mutex::new(None))
    }

    fn get_or_build<E>(&self, build: impl FnOnce() -> Result<T, E>) -> Result<Arc<T>, E> {
        self.get_or_build_keeping(build, |_| true)
    }

    /// [`Slot::get_or_build`], keeping what was built only if `keep` says
    /// so (it was built from files that could all be read).
    fn get_or_build_keeping<E>(
        &self,
        build: impl FnOnce() -> Result<T, E>,
        keep: impl FnOnce(&T) -> bool,
    ) -> Result<Arc<T>, E> {
        // A panic while building leaves nothing half-made: take the lock over.
        let mut slot = crate::lock::lock(&self.0);
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        let built = Arc::new(build()?);
        if keep(&built) {
            *slot = Some(built.clone());
        }
        Ok(built)
    }
}

pub(super) struct Clients {
    s3: Slot<S3Client>,
    http: Slot<HttpClient>,
    api: Slot<Api>,
    drs: Slot<DrsClient>,
    /// Where the S3 client records its multipart uploads while in flight.
    journal: Option<Arc<dyn UploadJournal>>,
    /// What the clients are built from.
    settings: Arc<Settings>,
}

impl Clients {
    pub(super) fn new(journal: Option<Arc<dyn UploadJournal>>, settings: Arc<Settings>) -> Clients {
        Clients {
            s3: Slot::new(),
            http: Slot::new(),
            api: Slot::new(),
            drs: Slot::new(),
            journal,
            settings,
        }
    }

    pub(super) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(super) fn s3(&self) -> Result<Arc<S3Client>, RemoteError> {
        self.s3.get_or_build(|| {
            let settings = &self.settings;
            let client = S3Client::new(
                S3Config::from_settings(settings)?,
                S3Credentials::from_settings(settings)?,
            )?;
            Ok(match &self.journal {
                Some(journal) => client.with_journal(journal.clone()),
                None => client,
            })
        })
    }

    pub(super) fn http(&self) -> Result<Arc<HttpClient>, RemoteError> {
        self.http
            .get_or_build(|| HttpClient::new(HttpConfig::from_settings(&self.settings)))
    }

    /// The connections of DRS and Indexd calls.
    pub(super) fn api(&self) -> Result<Arc<Api>, DrsError> {
        self.api
            .get_or_build(|| Api::new(&HttpConfig::from_settings(&self.settings)))
    }

    /// The DRS client. One built while the Gen3 API key file could not be
    /// read is not kept: once the file is there, the commons that issued
    /// the key is known without a restart.
    pub(super) fn drs(&self) -> Result<Arc<DrsClient>, DrsError> {
        let build = || {
            let api = Api::clone(&*self.api()?);
            let settings = &self.settings;
            let client = DrsClient::with_api(
                api,
                DrsServers::from_settings(settings)?,
                DrsAuth::from_settings(settings)?,
            );
            // `drs_wait_secs`: how long a DRS server answering 202 (not
            // ready) is waited on before the object is given up on.
            Ok(match settings.secs(Key::DrsWaitSecs) {
                Some(bound) => client.with_pending_bound(bound),
                None => client,
            })
        };
        self.drs
            .get_or_build_keeping(build, DrsClient::read_the_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_build_is_not_kept_and_a_good_one_is() {
        let slot = Slot::<u32>::new();
        let failed = slot.get_or_build::<RemoteError>(|| {
            Err(RemoteError::BadUrl {
                url: "x".into(),
                why: "no".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(*slot.get_or_build(|| Ok::<_, RemoteError>(7)).unwrap(), 7);
        assert_eq!(*slot.get_or_build(|| Ok::<_, RemoteError>(8)).unwrap(), 7);
    }

    #[test]
    fn a_build_its_check_says_not_to_keep_is_handed_out_and_built_again() {
        let slot = Slot::<u32>::new();
        let build = |n| slot.get_or_build_keeping(|| Ok::<_, RemoteError>(n), |n| *n > 1);
        assert_eq!(*build(1).unwrap(), 1);
        assert_eq!(*build(2).unwrap(), 2);
        assert_eq!(*build(3).unwrap(), 2, "kept from the second build");
    }
}
