//! A throwaway public-key infrastructure made per run: a test CA, another
//! CA nobody trusts, and server certificates for `127.0.0.1` — a good one,
//! one from the other CA, an expired one, and one for another name — each
//! written as PEM files (certificate chain, key) a server can load; and a
//! client certificate from the test CA for the user `sluice` (PostgreSQL's
//! `cert` authentication reads the user from its common name).
//!
//! Made with `rcgen` (ECDSA P-256), so no `openssl` binary is needed; the
//! server side of the https tests is lighttpd's `mod_openssl`, which reads
//! these files like any other.

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

/// The user the client certificate is made for (its common name).
pub const CLIENT_CERT_USER: &str = "sluice";

/// Which server certificate a server presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerCert {
    /// For `127.0.0.1` and `localhost`, from the test CA, valid now.
    Good,
    /// For `127.0.0.1`, from another CA that nobody trusts.
    OtherCa,
    /// For `127.0.0.1`, from the test CA, expired a year ago.
    Expired,
    /// From the test CA, valid now, for `other.invalid` only.
    OtherName,
}

impl ServerCert {
    /// Every kind.
    pub const ALL: [ServerCert; 4] = [
        ServerCert::Good,
        ServerCert::OtherCa,
        ServerCert::Expired,
        ServerCert::OtherName,
    ];

    fn stem(self) -> &'static str {
        match self {
            ServerCert::Good => "good",
            ServerCert::OtherCa => "other-ca",
            ServerCert::Expired => "expired",
            ServerCert::OtherName => "other-name",
        }
    }
}

/// A server certificate's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// The certificate chain (server certificate, then its CA), PEM.
    pub cert: PathBuf,
    /// The private key, PKCS#8 PEM.
    pub key: PathBuf,
}

/// The CAs and server certificates of one run, in a temporary directory
/// removed on drop.
#[derive(Debug)]
pub struct TestPki {
    dir: tempfile::TempDir,
}

fn err(e: rcgen::Error) -> io::Error {
    io::Error::other(format!("rcgen: {e}"))
}

fn ca(name: &str) -> io::Result<CertifiedIssuer<'static, KeyPair>> {
    let mut p = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p.not_before = rcgen::date_time_ymd(2000, 1, 1);
    p.not_after = rcgen::date_time_ymd(2999, 1, 1);
    CertifiedIssuer::self_signed(p, KeyPair::generate().map_err(err)?).map_err(err)
}

fn server_params(names: &[SanType]) -> io::Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    p.distinguished_name
        .push(DnType::CommonName, "sluice test server");
    p.subject_alt_names = names.to_vec();
    p.not_before = rcgen::date_time_ymd(2000, 1, 1);
    p.not_after = rcgen::date_time_ymd(2999, 1, 1);
    Ok(p)
}

impl TestPki {
    /// Makes both CAs and every [`ServerCert`], and writes them.
    pub fn new() -> io::Result<TestPki> {
        let dir = tempfile::Builder::new().prefix("sluice-pki-").tempdir()?;
        let test_ca = ca("sluice test CA")?;
        let other_ca = ca("sluice untrusted CA")?;
        std::fs::write(dir.path().join("ca.pem"), test_ca.pem())?;
        std::fs::write(dir.path().join("other-ca.pem"), other_ca.pem())?;
        let loopback = [
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            SanType::DnsName("localhost".try_into().map_err(err)?),
        ];
        for kind in ServerCert::ALL {
            let (mut params, issuer) = match kind {
                ServerCert::Good => (server_params(&loopback)?, &test_ca),
                ServerCert::OtherCa => (server_params(&loopback)?, &other_ca),
                ServerCert::Expired => (server_params(&loopback)?, &test_ca),
                ServerCert::OtherName => (
                    server_params(&[SanType::DnsName("other.invalid".try_into().map_err(err)?)])?,
                    &test_ca,
                ),
            };
            if kind == ServerCert::Expired {
                params.not_before = rcgen::date_time_ymd(2001, 1, 1);
                params.not_after = rcgen::date_time_ymd(2002, 1, 1);
            }
            let key = KeyPair::generate().map_err(err)?;
            let cert = params.signed_by(&key, issuer).map_err(err)?;
            let chain = format!("{}{}", cert.pem(), issuer.pem());
            std::fs::write(dir.path().join(format!("{}.pem", kind.stem())), chain)?;
            std::fs::write(
                dir.path().join(format!("{}.key", kind.stem())),
                key.serialize_pem(),
            )?;
        }
        let mut client = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        client
            .distinguished_name
            .push(DnType::CommonName, CLIENT_CERT_USER);
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        client.not_before = rcgen::date_time_ymd(2000, 1, 1);
        client.not_after = rcgen::date_time_ymd(2999, 1, 1);
        let key = KeyPair::generate().map_err(err)?;
        let cert = client.signed_by(&key, &test_ca).map_err(err)?;
        std::fs::write(dir.path().join("client.pem"), cert.pem())?;
        std::fs::write(dir.path().join("client.key"), key.serialize_pem())?;
        Ok(TestPki { dir })
    }

    /// A client certificate from the test CA for the user
    /// [`CLIENT_CERT_USER`] (the certificate alone, and its key).
    pub fn client(&self) -> CertFiles {
        CertFiles {
            cert: self.dir.path().join("client.pem"),
            key: self.dir.path().join("client.key"),
        }
    }

    /// The test CA's certificate (PEM): what a client adds with `--ca-file`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The untrusted CA's certificate (PEM).
    pub fn other_ca_file(&self) -> PathBuf {
        self.dir.path().join("other-ca.pem")
    }

    /// A server certificate's files.
    pub fn server(&self, kind: ServerCert) -> CertFiles {
        CertFiles {
            cert: self.dir.path().join(format!("{}.pem", kind.stem())),
            key: self.dir.path().join(format!("{}.key", kind.stem())),
        }
    }

    /// The directory holding every file.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// A rustls server configuration presenting `files` (the fault proxy's
/// https mode).
pub(crate) fn server_config(files: &CertFiles) -> io::Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |e: rustls::pki_types::pem::Error| io::Error::new(io::ErrorKind::InvalidData, e);
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .map_err(bad)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(bad)?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
