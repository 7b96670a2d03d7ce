//! TLS to PostgreSQL with rustls (the `ring` provider), as libpq reads
//! `sslmode`:
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `allow`, `prefer` (the default) | when the server offers it, else plain | not checked |
//! | `require` | always (a server without TLS is refused) | not checked; with `sslrootcert`, checked as `verify-ca` |
//! | `verify-ca` | always | its chain, to the roots |
//! | `verify-full` | always | its chain, and that it names the host |
//!
//! The roots: the file `sslrootcert` names (`sslrootcert=system`: the
//! platform's); without it, `~/.postgresql/root.crt` when that file exists,
//! as libpq reads it, else the platform's roots (where libpq would refuse
//! to connect). `sslcert` and `sslkey` (PEM) give a client certificate;
//! libpq's default files for them (`~/.postgresql/postgresql.crt`) are not
//! read: a client certificate is sent only when the URL names one.
//!
//! No channel binding is offered (SCRAM-SHA-256, not `-PLUS`), so a URL
//! with `channel_binding=require` cannot log in.

use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP only.
    Disable,
    /// Read as `prefer` (libpq tries plain first; the outcome is the same
    /// connection either way).
    Allow,
    /// TLS when the server offers it, unchecked; plain otherwise.
    Prefer,
    /// TLS always, unchecked (checked as `verify-ca` with `sslrootcert`).
    Require,
    /// TLS always; the chain is checked, not the name.
    VerifyCa,
    /// TLS always; the chain and the host name are checked.
    VerifyFull,
}

impl SslMode {
    /// The mode a URL's value names.
    pub(crate) fn parse(value: &str) -> Option<SslMode> {
        Some(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// As the URL writes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What the driver is told: whether TLS is tried, and whether a server
    /// without it is refused.
    pub(crate) fn driver(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as D;
        match self {
            SslMode::Disable => D::Disable,
            SslMode::Allow | SslMode::Prefer => D::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => D::Require,
        }
    }
}

/// The TLS figures a URL gives (read out of it before the driver's parser,
/// which knows none but `sslmode`'s first three values).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TlsParams {
    /// `sslmode` (`None`: not given, read as `prefer`).
    pub mode: Option<SslMode>,
    /// `sslrootcert`: a PEM file, or `system`.
    pub root_cert: Option<String>,
    /// `sslcert`: the client's certificate chain (PEM).
    pub cert: Option<PathBuf>,
    /// `sslkey`: the client's private key (PEM).
    pub key: Option<PathBuf>,
}

/// What is checked of the server's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Nothing,
    Chain,
    ChainAndName,
}

/// Where the roots come from, as the messages say it.
fn roots_named(params: &TlsParams) -> (Roots, String) {
    match params.root_cert.as_deref() {
        Some("system") => (Roots::Platform, "the platform's roots".into()),
        Some(file) => (
            Roots::File(PathBuf::from(file)),
            format!("roots from {file}"),
        ),
        None => match std::env::var_os("HOME")
            .map(|h| Path::new(&h).join(".postgresql").join("root.crt"))
            .filter(|p| p.is_file())
        {
            Some(p) => {
                let shown = format!("roots from {}", p.display());
                (Roots::File(p), shown)
            }
            None => (Roots::Platform, "the platform's roots".into()),
        },
    }
}

enum Roots {
    File(PathBuf),
    Platform,
}

/// The connector every connection of a store uses: a rustls configuration
/// made once, when the store is opened (its files read then).
#[derive(Clone)]
pub(crate) struct MakeRustls {
    config: Arc<ClientConfig>,
    /// `sslmode=…` and what is checked, for messages.
    pub(crate) described: String,
}

impl fmt::Debug for MakeRustls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MakeRustls")
            .field("described", &self.described)
            .finish_non_exhaustive()
    }
}

impl MakeRustls {
    /// The connector for `params`; an error names the file that could not
    /// be read and why.
    pub(crate) fn new(params: &TlsParams) -> Result<MakeRustls, String> {
        let mode = params.mode.unwrap_or(SslMode::Prefer);
        let check = match mode {
            SslMode::Disable | SslMode::Allow | SslMode::Prefer => Check::Nothing,
            SslMode::Require if params.root_cert.is_some() => Check::Chain,
            SslMode::Require => Check::Nothing,
            SslMode::VerifyCa => Check::Chain,
            SslMode::VerifyFull => Check::ChainAndName,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let (verifier, described): (Arc<dyn ServerCertVerifier>, String) = match check {
            Check::Nothing => (
                Arc::new(NoCheck(provider.clone())),
                format!("sslmode={}, the certificate not checked", mode.name()),
            ),
            Check::Chain | Check::ChainAndName => {
                let (roots, shown) = roots_named(params);
                let store = Arc::new(load_roots(&roots)?);
                let webpki = WebPkiServerVerifier::builder_with_provider(store, provider.clone())
                    .build()
                    .map_err(|e| format!("TLS ({shown}): {e}"))?;
                let what = if check == Check::Chain {
                    "the chain checked"
                } else {
                    "the chain and the host name checked"
                };
                let described = format!("sslmode={}, {what} against {shown}", mode.name());
                if check == Check::Chain {
                    (Arc::new(ChainOnly(webpki)), described)
                } else {
                    (webpki as Arc<dyn ServerCertVerifier>, described)
                }
            }
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&params.cert, &params.key) {
            (Some(cert), Some(key)) => {
                let chain = read_certs(cert)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("sslkey {}: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("sslcert/sslkey: {e}"))?
            }
            (None, None) => builder.with_no_client_auth(),
            (Some(_), None) => return Err("sslcert is given without sslkey".into()),
            (None, Some(_)) => return Err("sslkey is given without sslcert".into()),
        };
        Ok(MakeRustls {
            config: Arc::new(config),
            described,
        })
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it", path.display()));
    }
    Ok(certs)
}

fn load_roots(roots: &Roots) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            for cert in read_certs(path).map_err(|e| format!("sslrootcert {e}"))? {
                store
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            }
        }
        Roots::Platform => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(format!(
                    "no trust roots found on this machine (sslrootcert not given){}",
                    found
                        .errors
                        .first()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ));
            }
        }
    }
    Ok(store)
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnect> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(RustlsConnect {
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
            name,
        })
    }
}

/// One connection's TLS handshake.
pub(crate) struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            self.connector
                .connect(self.name, stream)
                .await
                .map(RustlsStream)
        })
    }
}

/// A connection over TLS.
pub(crate) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

/// `prefer` and `require` without roots: the handshake is TLS (its
/// signatures checked), the certificate is not.
#[derive(Debug)]
struct NoCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: webpki's checks but the name's. webpki checks the chain
/// (and the validity dates) before the name, so a name error means the
/// chain passed.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
