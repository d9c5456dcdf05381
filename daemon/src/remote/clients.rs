//! One client of each kind for a process's life: they keep connections
//! open between objects. Built on first use from the environment (and the
//! AWS profile files); a failure is not kept, so fixing the setup needs no
//! restart.

use std::sync::{Arc, Mutex};

use super::{
    HttpClient, HttpConfig, RemoteError, S3Client, S3Config, S3Credentials, UploadJournal,
};

static S3: Mutex<Option<Arc<S3Client>>> = Mutex::new(None);
static HTTP: Mutex<Option<Arc<HttpClient>>> = Mutex::new(None);
static JOURNAL: Mutex<Option<Arc<dyn UploadJournal>>> = Mutex::new(None);

pub fn shared_s3() -> Result<Arc<S3Client>, RemoteError> {
    let mut slot = S3.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(client) = slot.as_ref() {
        return Ok(client.clone());
    }
    let mut client = S3Client::new(S3Config::from_env()?, S3Credentials::from_env()?)?;
    if let Some(journal) = JOURNAL.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        client = client.with_journal(journal);
    }
    Ok(slot.insert(Arc::new(client)).clone())
}

/// Has the shared S3 client record its multipart uploads in `journal` (the
/// daemon's registry), so the next start can abort those a kill left.
pub fn record_uploads_in(journal: Arc<dyn UploadJournal>) {
    *JOURNAL.lock().unwrap_or_else(|e| e.into_inner()) = Some(journal);
    // A client built before goes: the next one records.
    *S3.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

pub fn shared_http() -> Result<Arc<HttpClient>, RemoteError> {
    let mut slot = HTTP.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(client) = slot.as_ref() {
        return Ok(client.clone());
    }
    let client = HttpClient::new(HttpConfig::from_env())?;
    Ok(slot.insert(Arc::new(client)).clone())
}
