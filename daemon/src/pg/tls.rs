//! TLS to the team's database: rustls, as the rest of drsd does it.

use std::path::Path;
use std::sync::Arc;

use tokio_postgres_rustls::MakeRustlsConnect;

use crate::pool::PoolError;

type Result<T, E = PoolError> = std::result::Result<T, E>;

/// TLS as the rest of drsd does it: rustls with the web's roots and the
/// extra roots of each of `roots` (what it is, and its path); the
/// certificate is always checked (`sslmode=prefer`, the default, falls back
/// to plain only when the server offers no TLS at all; `sslmode=disable`
/// never tries it). A file of roots decides which server is the lab's
/// database: it is read as every such file is (`trusted_file`: no other
/// user could have written it), and one that cannot be read, or holds no
/// certificate, is an error naming it, never a warning the daemon goes on
/// past.
pub(super) fn tls(roots: &[(&'static str, &Path)]) -> Result<MakeRustlsConnect> {
    let mut store = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for (what, path) in roots {
        for cert in read_roots(what, path)? {
            store
                .add(cert)
                .map_err(|e| untrusted(what, path, format!("a certificate is refused: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The certificates of the PEM file `path`, opened through `trusted_file`.
pub(super) fn read_roots(
    what: &'static str,
    path: &Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    let pem = crate::trusted_file::read(path).map_err(|e| untrusted(what, path, e.to_string()))?;
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| untrusted(what, path, format!("not PEM certificates: {e:?}")))?;
    if certs.is_empty() {
        return Err(untrusted(what, path, "it holds no certificate".into()));
    }
    Ok(certs)
}

fn untrusted(what: &'static str, path: &Path, why: String) -> PoolError {
    PoolError::TrustedFile {
        what,
        path: path.to_path_buf(),
        why,
    }
}
