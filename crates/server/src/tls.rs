//! TLS: an encrypted listener beside the plain ones, with rustls.
//!
//! A local service usually sits behind the loopback interface or a Unix
//! socket, where nobody else sees the bytes. Once it is reached over a
//! network (another container, another host) passwords and values cross
//! the wire, and TLS is what keeps them private and makes sure the client
//! talks to this server. respite follows redis.conf's model: a separate
//! `tls_port` (the plain `port` keeps working beside it, so local clients
//! need not change), a certificate and key (`tls_cert_file`,
//! `tls_key_file`), and a CA (`tls_ca_cert_file`) against which client
//! certificates are checked when `tls_auth_clients` asks for them: `yes`
//! (the default, as in Redis: a client without a certificate signed by
//! the CA is refused during the handshake), `optional` (a certificate, if
//! sent, must verify) or `no`.
//!
//! The TLS code is rustls, pure Rust with the `ring` provider: no OpenSSL
//! to build against or keep patched. TLS 1.2 and 1.3 are offered, with
//! rustls's default cipher suites (all of them current AEAD suites).
//!
//! Certificates expire and are replaced while the server runs, so they
//! are read again on SIGHUP (`systemctl reload`): the new files become the
//! configuration for every handshake after that, and connections already
//! open keep theirs. A reload whose files do not load (a key that does not
//! match, a half-written file) changes nothing and says why in the log;
//! the server keeps serving with the certificates it had.
//!
//! The handshake runs in the connection's own task, under a time limit,
//! so a client that connects and never speaks cannot hold up the accept
//! loop or a connection slot.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::config::Config;

/// How long a client has to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub use crate::config::AuthClients;

/// Why the TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A setting the TLS port needs is missing.
    #[error("tls_port is set but {0} is not")]
    Missing(&'static str),
    /// A PEM file could not be read or holds nothing usable.
    #[error("cannot read {what} {path}: {message}")]
    File {
        /// Which file it is (certificate, key, CA).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// rustls refused the combination (a key that does not match the
    /// certificate, a CA it cannot use).
    #[error("TLS configuration refused: {0}")]
    Rustls(String),
}

fn file_error(what: &'static str, path: &Path, message: impl ToString) -> TlsError {
    TlsError::File {
        what,
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// Reads every certificate of a PEM file.
fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(what, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(what, path, e))?;
    if certs.is_empty() {
        return Err(file_error(what, path, "no certificate in the file"));
    }
    Ok(certs)
}

/// Builds the rustls configuration the settings describe, reading the
/// files now. `None` when TLS is off (no `tls_port`).
pub fn server_config(c: &Config) -> Result<Option<Arc<ServerConfig>>, TlsError> {
    if c.tls_port.is_none() {
        return Ok(None);
    }
    // The TLS listener is bound on `bind` like the plain one.
    if c.bind.is_empty() {
        return Err(TlsError::Missing("bind"));
    }
    let cert_path = c
        .tls_cert_file
        .as_deref()
        .ok_or(TlsError::Missing("tls_cert_file"))?;
    let key_path = c
        .tls_key_file
        .as_deref()
        .ok_or(TlsError::Missing("tls_key_file"))?;
    let chain = certificates("certificate file", cert_path)?;
    let key =
        PrivateKeyDer::from_pem_file(key_path).map_err(|e| file_error("key file", key_path, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = match c.tls_auth_clients {
        AuthClients::No => builder.with_no_client_auth(),
        mode => {
            let ca_path = c
                .tls_ca_cert_file
                .as_deref()
                .ok_or(TlsError::Missing("tls_ca_cert_file"))?;
            let mut roots = RootCertStore::empty();
            for cert in certificates("CA file", ca_path)? {
                roots
                    .add(cert)
                    .map_err(|e| file_error("CA file", ca_path, e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if mode == AuthClients::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::Rustls(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    Ok(Some(Arc::new(config)))
}

/// The TLS configuration in force, swapped whole on reload.
#[derive(Default)]
pub struct TlsState(RwLock<Option<Arc<ServerConfig>>>);

impl TlsState {
    /// The configuration new handshakes use.
    pub fn current(&self) -> Option<Arc<ServerConfig>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts `config` in force for new handshakes.
    pub fn set(&self, config: Option<Arc<ServerConfig>>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = config;
    }
}

/// SIGHUP: reads the certificate, key and CA files again (from `new`'s
/// paths) and puts them in force if they load. Returns what happened, for
/// the reload's log line; `None` when TLS is off.
pub fn reload(state: &TlsState, new: &Config) -> Option<Result<(), TlsError>> {
    state.current()?;
    Some(server_config(new).map(|config| {
        if config.is_some() {
            state.set(config);
        }
    }))
}
