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
//! Over TLS the login is bound to the connection (SCRAM-SHA-256-PLUS with
//! `tls-server-end-point`) when the server offers it, as libpq does with
//! `channel_binding=prefer`; `channel_binding=require` demands it.

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

    /// Called for every connection, TLS or not (a Unix socket's host is
    /// `""`): a name rustls cannot take fails the handshake, if one is
    /// tried, not the connection.
    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnect> {
        Ok(RustlsConnect {
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
            name: ServerName::try_from(domain.to_string())
                .map_err(|e| format!("{domain:?} cannot be checked by TLS: {e}")),
        })
    }
}

/// One connection's TLS handshake.
pub(crate) struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: Result<ServerName<'static>, String>,
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
            let name = self
                .name
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            self.connector.connect(name, stream).await.map(RustlsStream)
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
    /// `tls-server-end-point` (RFC 5929), which SCRAM-SHA-256-PLUS binds
    /// the login to: the hash of the server's certificate.
    fn channel_binding(&self) -> ChannelBinding {
        self.0
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|cert| end_point_hash(cert))
            .map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

/// The certificate's hash as `tls-server-end-point` takes it: by the hash
/// of its signature algorithm, SHA-256 for MD5 and SHA-1 (RFC 5929, 4.1);
/// `None` for an algorithm whose hash is not read here (RSA-PSS, EdDSA:
/// no binding is offered then).
fn end_point_hash(cert: &[u8]) -> Option<Vec<u8>> {
    use sha2::Digest;
    // sha{1,256,384,512}WithRSAEncryption, md5WithRSAEncryption:
    // 1.2.840.113549.1.1.{5,11,12,13,4}; ecdsa-with-SHA{1,256,384,512}:
    // 1.2.840.10045.4.1, 1.2.840.10045.4.3.{2,3,4}.
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01];
    const ECDSA_SHA2: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];
    let oid = signature_algorithm(cert)?;
    let (prefix, last) = oid.split_at(oid.len().checked_sub(1)?);
    let bits = match (prefix, last[0]) {
        (RSA, 0x04 | 0x05 | 0x0b) => 256,
        (RSA, 0x0c) => 384,
        (RSA, 0x0d) => 512,
        (_, _) if oid == ECDSA_SHA1 => 256,
        (ECDSA_SHA2, 0x02) => 256,
        (ECDSA_SHA2, 0x03) => 384,
        (ECDSA_SHA2, 0x04) => 512,
        _ => return None,
    };
    Some(match bits {
        256 => sha2::Sha256::digest(cert).to_vec(),
        384 => sha2::Sha384::digest(cert).to_vec(),
        _ => sha2::Sha512::digest(cert).to_vec(),
    })
}

/// The OID of a DER certificate's `signatureAlgorithm` (the second field
/// of its outer SEQUENCE).
fn signature_algorithm(cert: &[u8]) -> Option<&[u8]> {
    let (0x30, body, _) = der(cert)? else {
        return None;
    };
    let (_tbs, _, rest) = der(body)?;
    let (0x30, algorithm, _) = der(rest)? else {
        return None;
    };
    let (0x06, oid, _) = der(algorithm)? else {
        return None;
    };
    Some(oid)
}

/// One DER element: its tag, its content, and what follows it.
fn der(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *b.first()?;
    let first = *b.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = len << 8 | usize::from(*b.get(2 + i)?);
        }
        (len, 2 + n)
    };
    let end = header.checked_add(len)?;
    Some((tag, b.get(header..end)?, b.get(end..)?))
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
