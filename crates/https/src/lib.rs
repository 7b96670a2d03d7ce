//! The https stack that sluice-git and sluice-forge share: reqwest on
//! rustls (the `ring` provider; no OpenSSL, no native-tls), the trust roots,
//! the proxy choice, and the table that classes a TLS failure from its type.
//!
//! Order of operations:
//!
//! 1. An [`HttpsConfig`] is made once (the CLI's `--ca-file`, `--proxy`,
//!    `--no-proxy`; a library caller's own choice) and handed to the
//!    clients (`GitClient::with_https`, `ForgeClientBuilder::https`).
//! 2. A client builds its reqwest clients from it ([`HttpsConfig::client_builder`]):
//!    the platform's roots are loaded then, once per process
//!    ([`platform_roots`]), plus the config's own.
//! 3. When a request fails, [`tls_refusal`] walks the error's source chain
//!    and finds the `rustls::Error` in it, if any: a certificate error or an
//!    alert is a [`TlsRefusal`], the server's answer (trying again cannot
//!    change it). Anything else (a handshake cut, reset or timeout) is left
//!    to the caller's transport table.
//! 4. When a request is answered with a status that is not a success,
//!    [`status_class`] classes it: the one HTTP status table of the
//!    workspace, which the forge's calls and git's smart HTTP both use, so a
//!    status means the same in both.
//!
//! ```
//! let config = sluice_https::HttpsConfig::new();
//! let client = config.client_builder().expect("roots load").build().expect("client");
//! # let _ = client;
//! ```
//!
//! # Features
//!
//! `tls` (default): https through rustls, the trust roots ([`HttpsConfig::with_ca_file`],
//! [`platform_roots`]) and the TLS table ([`refusal_of`]). Without it the
//! crate keeps what plain http needs — the proxies, the clients' builders
//! (no TLS backend: an `https://` request fails), [`tls_refusal`] always
//! `None`, the status table — for sluice-git's `http` feature.
//!
//! # Roots
//! The platform's: `SSL_CERT_FILE`, when set, is the only file read (as curl
//! and git read it); otherwise the system store as `rustls-native-certs`
//! finds it (`/etc/ssl/certs` and friends, or `SSL_CERT_DIR`). A copy baked
//! into the binary (webpki-roots) is not used: a CA the machine's owner
//! installed must be trusted, and one they removed must not be.
//! [`HttpsConfig::with_ca_file`] adds roots on top of those.
//!
//! # Modules
//!
//! This file (the config, the proxies, the roots, the TLS table) and
//! `status` (the HTTP status table: [`status_class`], [`RateLimitFacts`],
//! [`StatusClass`]).
//! URLs lose their user info through the workspace's one
//! [`sluice_policy::text::redact`].
//!
//! # The contract
//!
//! Every public item is the library's contract, for sluice-git and
//! sluice-forge and for a service building its own clients:
//! [`HttpsConfig`] (and [`ProxyChoice`], [`HttpsError`]), [`Proxies`],
//! [`platform_roots`] and [`read_pem_certs`], the TLS table
//! ([`tls_refusal`], [`refusal_of`], [`find_rustls_error`], [`TlsRefusal`]),
//! [`proxy_auth_required`] and [`proxy_name`], and the status table
//! ([`status_class`], [`RateLimitFacts`], [`StatusClass`]), and [`request_id`].
//!
//! # Classes from types, with one exception here
//!
//! A class is decided from types and the wire, never from error text. The
//! workspace has two exceptions, each because the signal has no type: a
//! proxy's 407 to CONNECT ([`proxy_auth_required`], hyper-util's private
//! error type: its words are matched) and GitHub's secondary rate limit
//! (its message, in sluice-forge).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod status;

pub use status::{status_class, RateLimitFacts, StatusClass};

#[cfg(feature = "tls")]
use std::path::Path;
use std::path::PathBuf;
#[cfg(feature = "tls")]
use std::sync::Arc;
#[cfg(feature = "tls")]
use std::sync::OnceLock;

#[cfg(feature = "tls")]
use rustls::pki_types::pem::PemObject;
#[cfg(feature = "tls")]
use rustls::pki_types::CertificateDer;
#[cfg(feature = "tls")]
use rustls::{AlertDescription, CertificateError, RootCertStore};
use sluice_policy::text::redact;

/// Why an https configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpsError {
    /// A PEM file of roots that cannot be read or holds no certificate.
    #[error("cannot read trust roots from {path}: {reason}")]
    Roots {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A proxy URL that is not one.
    #[error("invalid proxy {proxy}: {reason}")]
    Proxy {
        /// The proxy as given, without user info.
        proxy: String,
        /// Why.
        reason: String,
    },
    /// The TLS stack refused the configuration.
    #[error("cannot set up TLS: {0}")]
    Tls(String),
}

/// Which proxy the clients use.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum ProxyChoice {
    /// As curl reads the environment ([`Proxies::from_vars`]): `https_proxy`
    /// or `HTTPS_PROXY` for https, `http_proxy` (lower case only, as in
    /// curl) for http, `all_proxy` or `ALL_PROXY` for either when those are
    /// unset, and `no_proxy` or `NO_PROXY` naming hosts, domains and
    /// addresses that go direct. Read when a client is built.
    #[default]
    Environment,
    /// This proxy for every http and https request (`http://[user:pass@]host:port`).
    Url(String),
    /// No proxy at all, whatever the environment says.
    Direct,
}

impl std::fmt::Debug for ProxyChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyChoice::Environment => f.write_str("Environment"),
            ProxyChoice::Url(u) => f.debug_tuple("Url").field(&redact(u)).finish(),
            ProxyChoice::Direct => f.write_str("Direct"),
        }
    }
}

/// The https settings of a client: extra trust roots and the proxy.
///
/// Cheap to clone; every client built from one shares its roots.
///
/// # Default
/// The platform's roots only; proxies from the environment
/// ([`ProxyChoice::Environment`]).
#[derive(Clone, Default)]
pub struct HttpsConfig {
    #[cfg(feature = "tls")]
    extra: Arc<Vec<CertificateDer<'static>>>,
    ca_files: Vec<PathBuf>,
    /// `http.sslCAInfo`: roots that replace the platform's.
    #[cfg(feature = "tls")]
    ca_info: Option<(PathBuf, Arc<Vec<CertificateDer<'static>>>)>,
    /// `http.sslVerify=false`: the server's certificate is not checked.
    no_verify: bool,
    proxy: ProxyChoice,
}

impl std::fmt::Debug for HttpsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("HttpsConfig");
        d.field("ca_files", &self.ca_files);
        #[cfg(feature = "tls")]
        d.field("extra_roots", &self.extra.len())
            .field("ca_info", &self.ca_info.as_ref().map(|(p, _)| p));
        d.field("no_verify", &self.no_verify)
            .field("proxy", &self.proxy)
            .finish()
    }
}

impl HttpsConfig {
    /// The platform's roots, proxies from the environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trust the certificates in the PEM file at `path` as well (`--ca-file`),
    /// on top of the platform's roots (or `SSL_CERT_FILE`'s). The file is
    /// read now: one that cannot be read, or that holds no certificate, is
    /// an error here and never a failure of a remote call later. (With the
    /// `tls` feature.)
    #[cfg(feature = "tls")]
    pub fn with_ca_file(mut self, path: impl AsRef<Path>) -> Result<Self, HttpsError> {
        let path = path.as_ref();
        let certs = read_pem_certs(path)?;
        let mut extra = (*self.extra).clone();
        extra.extend(certs);
        self.extra = Arc::new(extra);
        self.ca_files.push(path.to_owned());
        Ok(self)
    }

    /// Trust only the certificates in the PEM file at `path` instead of the
    /// platform's roots (git's `http.sslCAInfo`; it wins over
    /// `SSL_CERT_FILE`); [`HttpsConfig::with_ca_file`]'s are still added.
    /// The file is read now. (With the `tls` feature.)
    #[cfg(feature = "tls")]
    pub fn with_ca_info(mut self, path: impl AsRef<Path>) -> Result<Self, HttpsError> {
        let path = path.as_ref();
        let certs = read_pem_certs(path)?;
        self.ca_info = Some((path.to_owned(), Arc::new(certs)));
        Ok(self)
    }

    /// Check the server's certificate (`true`, the default) or not (git's
    /// `http.sslVerify=false`, `GIT_SSL_NO_VERIFY`): without checking, any
    /// certificate for any name is taken (the handshake's signatures are
    /// still checked). (With the `tls` feature.)
    #[cfg(feature = "tls")]
    pub fn with_ssl_verify(mut self, verify: bool) -> Self {
        self.no_verify = !verify;
        self
    }

    /// Whether the server's certificate is checked
    /// ([`HttpsConfig::with_ssl_verify`]).
    pub fn ssl_verify(&self) -> bool {
        !self.no_verify
    }

    /// The file given to [`HttpsConfig::with_ca_info`], if any.
    #[cfg(feature = "tls")]
    pub fn ca_info(&self) -> Option<&Path> {
        self.ca_info.as_ref().map(|(p, _)| p.as_path())
    }

    /// Use this proxy choice. A [`ProxyChoice::Url`] is checked now.
    pub fn with_proxy(mut self, proxy: ProxyChoice) -> Result<Self, HttpsError> {
        if let ProxyChoice::Url(u) = &proxy {
            reqwest::Proxy::all(u.as_str()).map_err(|e| HttpsError::Proxy {
                proxy: redact(u),
                reason: e.to_string(),
            })?;
        }
        self.proxy = proxy;
        Ok(self)
    }

    /// The proxy choice.
    pub fn proxy(&self) -> &ProxyChoice {
        &self.proxy
    }

    /// The files given to [`HttpsConfig::with_ca_file`], in order.
    pub fn ca_files(&self) -> &[PathBuf] {
        &self.ca_files
    }

    /// The rustls client configuration: the `ring` provider, TLS 1.2 and
    /// 1.3, the platform's roots plus this config's, no client certificate.
    /// Fails only when the platform's roots cannot be read (an unreadable
    /// `SSL_CERT_FILE`). (With the `tls` feature.)
    #[cfg(feature = "tls")]
    pub fn rustls_config(&self) -> Result<rustls::ClientConfig, HttpsError> {
        let mut roots = match &self.ca_info {
            Some((_, certs)) => {
                let mut store = RootCertStore::empty();
                for c in certs.iter() {
                    store
                        .add(c.clone())
                        .map_err(|e| HttpsError::Tls(e.to_string()))?;
                }
                store
            }
            None => (*platform_roots().clone()?).clone(),
        };
        for c in self.extra.iter() {
            roots
                .add(c.clone())
                .map_err(|e| HttpsError::Tls(e.to_string()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| HttpsError::Tls(e.to_string()))?;
        let config = if self.no_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth()
        } else {
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        Ok(config)
    }

    /// The proxies this config routes through, the environment read now
    /// for [`ProxyChoice::Environment`].
    pub fn proxies(&self) -> Proxies {
        match &self.proxy {
            ProxyChoice::Environment => Proxies::from_env(),
            ProxyChoice::Url(u) => Proxies {
                http: Some(u.clone()),
                https: Some(u.clone()),
                no_proxy: Vec::new(),
            },
            ProxyChoice::Direct => Proxies::default(),
        }
    }

    /// A reqwest blocking client builder with this config's TLS and proxy
    /// set; the caller adds its own timeouts, pool and redirect settings.
    /// The proxies are resolved once, here ([`HttpsConfig::proxies`]), and
    /// reqwest's own reading of the environment is turned off: which proxy
    /// a request goes through is decided by [`Proxies::for_url`] alone,
    /// which is also what names the proxy in an error.
    pub fn client_builder(&self) -> Result<reqwest::blocking::ClientBuilder, HttpsError> {
        self.client_builder_with(self.proxies())
    }

    /// [`HttpsConfig::client_builder`] routing through `proxies`.
    pub fn client_builder_with(
        &self,
        proxies: Proxies,
    ) -> Result<reqwest::blocking::ClientBuilder, HttpsError> {
        let b = reqwest::blocking::Client::builder();
        #[cfg(feature = "tls")]
        let b = b.tls_backend_preconfigured(self.rustls_config()?);
        let mut b = b.no_proxy();
        if let Some(p) = routing(proxies)? {
            b = b.proxy(p);
        }
        Ok(b)
    }

    /// [`HttpsConfig::client_builder_with`] for reqwest's async client (git's
    /// smart HTTP drives it on a runtime of its own, so that every wait can
    /// be cut from outside: see the git crate's `http` module).
    pub fn async_client_builder_with(
        &self,
        proxies: Proxies,
    ) -> Result<reqwest::ClientBuilder, HttpsError> {
        let b = reqwest::Client::builder();
        #[cfg(feature = "tls")]
        let b = b.tls_backend_preconfigured(self.rustls_config()?);
        let mut b = b.no_proxy();
        if let Some(p) = routing(proxies)? {
            b = b.proxy(p);
        }
        Ok(b)
    }
}

/// The one proxy rule of a client routing through `proxies` (none when
/// direct); a proxy URL reqwest cannot use is refused here.
fn routing(proxies: Proxies) -> Result<Option<reqwest::Proxy>, HttpsError> {
    for u in [&proxies.http, &proxies.https].into_iter().flatten() {
        reqwest::Proxy::all(u.as_str()).map_err(|e| HttpsError::Proxy {
            proxy: redact(u),
            reason: e.to_string(),
        })?;
    }
    if proxies.is_direct() {
        return Ok(None);
    }
    Ok(Some(reqwest::Proxy::custom(move |url| {
        proxies.for_url(url).map(str::to_owned)
    })))
}

/// Which proxy each request goes through, as curl decides it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Proxies {
    /// For `http://` URLs.
    pub http: Option<String>,
    /// For `https://` URLs.
    pub https: Option<String>,
    /// `NO_PROXY`'s entries (lower case, leading dots removed).
    pub no_proxy: Vec<String>,
}

impl std::fmt::Debug for Proxies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxies")
            .field("http", &self.http.as_deref().map(redact))
            .field("https", &self.https.as_deref().map(redact))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

impl Proxies {
    /// The process's environment, read now ([`Proxies::from_vars`]).
    pub fn from_env() -> Proxies {
        Proxies::from_vars(|name| std::env::var(name).ok())
    }

    /// curl's rules over the variables `var` gives: `https_proxy`, else
    /// `HTTPS_PROXY`, for https; `http_proxy` (never `HTTP_PROXY`: a CGI
    /// program gets a request's `Proxy:` header under that name) for http;
    /// `all_proxy`, else `ALL_PROXY`, for either when unset; `no_proxy`,
    /// else `NO_PROXY`: entries separated by commas — `*` (everything), a
    /// host name or domain (`example.com` and `.example.com` both match the
    /// name and every name under it), an IP address, or an address range
    /// (`10.0.0.0/8`). An empty variable is unset; a proxy without a scheme
    /// is `http://`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Proxies {
        let get = |names: &[&str]| {
            names
                .iter()
                .filter_map(|n| var(n))
                .map(|v| v.trim().to_string())
                .find(|v| !v.is_empty())
        };
        let with_scheme = |v: String| {
            if v.contains("://") {
                v
            } else {
                format!("http://{v}")
            }
        };
        let all = get(&["all_proxy", "ALL_PROXY"]);
        let https = get(&["https_proxy", "HTTPS_PROXY"])
            .or_else(|| all.clone())
            .map(with_scheme);
        let http = get(&["http_proxy"]).or(all).map(with_scheme);
        let no_proxy = get(&["no_proxy", "NO_PROXY"])
            .map(|v| {
                v.split(',')
                    .map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase())
                    .filter(|e| !e.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Proxies {
            http,
            https,
            no_proxy,
        }
    }

    /// Whether no request goes through a proxy.
    pub fn is_direct(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// The proxy (as given, user info included) a request to `url` goes
    /// through; `None`: direct.
    pub fn for_url(&self, url: &reqwest::Url) -> Option<&str> {
        let proxy = match url.scheme() {
            "https" => self.https.as_deref(),
            "http" => self.http.as_deref(),
            _ => None,
        }?;
        let host = match url.host()? {
            url::Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
            url::Host::Ipv4(a) => a.to_string(),
            url::Host::Ipv6(a) => a.to_string(),
        };
        if self.no_proxy.iter().any(|e| no_proxy_matches(e, &host)) {
            return None;
        }
        Some(proxy)
    }

    /// The proxy for `url` without its user info (`http://host:port`),
    /// for messages.
    pub fn named_for(&self, url: &reqwest::Url) -> Option<String> {
        self.for_url(url).map(proxy_name)
    }
}

fn no_proxy_matches(entry: &str, host: &str) -> bool {
    if entry == "*" {
        return true;
    }
    let entry = entry.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        if let Some((net, bits)) = entry.split_once('/') {
            let (Ok(net), Ok(bits)) = (net.parse::<std::net::IpAddr>(), bits.parse::<u32>()) else {
                return false;
            };
            return match (ip, net) {
                (std::net::IpAddr::V4(a), std::net::IpAddr::V4(n)) if bits <= 32 => {
                    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
                    u32::from(a) & mask == u32::from(n) & mask
                }
                (std::net::IpAddr::V6(a), std::net::IpAddr::V6(n)) if bits <= 128 => {
                    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                    u128::from(a) & mask == u128::from(n) & mask
                }
                _ => false,
            };
        }
        return entry.parse::<std::net::IpAddr>().is_ok_and(|e| e == ip);
    }
    host == entry || host.ends_with(&format!(".{entry}"))
}

/// The certificates of a PEM file (at least one). (With the `tls` feature.)
#[cfg(feature = "tls")]
pub fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, HttpsError> {
    let err = |reason: String| HttpsError::Roots {
        path: path.to_owned(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| err(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(err("no CERTIFICATE block in it".into()));
    }
    Ok(certs)
}

/// Whether `e`'s source chain holds a proxy's 407 answer to CONNECT, as
/// hyper-util reports it: an error whose type is private
/// (`TunnelError::ProxyAuthRequired`), so its words are the one signal.
/// Tests against a real proxy (tinyproxy with basic auth) pin them.
///
/// One of the workspace's two text-matching exceptions (the other is
/// GitHub's secondary rate limit, in sluice-forge): it walks the chain
/// itself, matching each error's own words exactly, rather than joining the
/// chain with [`sluice_policy::text::error_chain`], whose line could match
/// words a server put in a deeper error.
pub fn proxy_auth_required(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(inner) = src {
        if inner.to_string() == "tunnel error: proxy authorization required" {
            return true;
        }
        src = inner.source();
    }
    false
}

/// `http.sslVerify=false`: any certificate is taken; the handshake's
/// signatures are still verified with the provider's algorithms.
#[cfg(feature = "tls")]
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

#[cfg(feature = "tls")]
impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
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
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The platform's roots, loaded on first use and kept for the process:
/// `SSL_CERT_FILE` alone when it is set (an unreadable one is an error, as
/// in curl), else the system store. A system store that cannot be read
/// leaves the roots empty (every server is then untrusted unless
/// `--ca-file` names its CA); what could not be read is logged at debug.
/// (With the `tls` feature.)
#[cfg(feature = "tls")]
pub fn platform_roots() -> &'static Result<Arc<RootCertStore>, HttpsError> {
    static ROOTS: OnceLock<Result<Arc<RootCertStore>, HttpsError>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut store = RootCertStore::empty();
        match std::env::var_os("SSL_CERT_FILE").filter(|v| !v.is_empty()) {
            Some(file) => {
                let certs = read_pem_certs(Path::new(&file))?;
                let (added, ignored) = store.add_parsable_certificates(certs);
                tracing::debug!(added, ignored, "trust roots from SSL_CERT_FILE");
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                for e in &found.errors {
                    tracing::debug!(error = %e, "a system trust root could not be read");
                }
                let (added, ignored) = store.add_parsable_certificates(found.certs);
                tracing::debug!(added, ignored, "trust roots from the system store");
            }
        }
        Ok(Arc::new(store))
    })
}

/// Why a TLS handshake was refused: the server's answer, never retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsRefusal {
    /// The certificate chains to no trusted root (or its signature is bad).
    Untrusted,
    /// The certificate has expired, or is not valid yet.
    Expired,
    /// The certificate is for another name.
    OtherName {
        /// The names the certificate holds, when rustls reported them.
        presented: Vec<String>,
    },
    /// Another certificate error (revoked, wrong purpose, bad encoding...).
    Certificate(String),
    /// The server sent an alert (it refused the handshake).
    Alert(String),
    /// No TLS version, cipher suite or extension both sides accept.
    Incompatible(String),
}

impl TlsRefusal {
    /// A short kebab-case name (`untrusted`, `expired`, `other-name`,
    /// `certificate`, `alert`, `incompatible`).
    pub fn kind(&self) -> &'static str {
        match self {
            TlsRefusal::Untrusted => "untrusted",
            TlsRefusal::Expired => "expired",
            TlsRefusal::OtherName { .. } => "other-name",
            TlsRefusal::Certificate(_) => "certificate",
            TlsRefusal::Alert(_) => "alert",
            TlsRefusal::Incompatible(_) => "incompatible",
        }
    }
}

impl std::fmt::Display for TlsRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsRefusal::Untrusted => f.write_str(
                "TLS: the server's certificate is not trusted (unknown issuer; --ca-file adds a root)",
            ),
            TlsRefusal::Expired => {
                f.write_str("TLS: the server's certificate has expired or is not valid yet")
            }
            TlsRefusal::OtherName { presented } if presented.is_empty() => {
                f.write_str("TLS: the server's certificate is for another name")
            }
            TlsRefusal::OtherName { presented } => write!(
                f,
                "TLS: the server's certificate is for another name ({})",
                presented.join(", ")
            ),
            TlsRefusal::Certificate(why) => write!(f, "TLS: the server's certificate: {why}"),
            TlsRefusal::Alert(what) => write!(f, "TLS: the server refused the handshake ({what})"),
            TlsRefusal::Incompatible(what) => {
                write!(f, "TLS: no protocol both sides accept ({what})")
            }
        }
    }
}

/// The `rustls::Error` in `e`'s source chain, if any. An `io::Error`
/// hides its inner error from `source()` (it forwards to the inner error's
/// own source), so each one on the way is opened with `get_ref`. (With the
/// `tls` feature.)
#[cfg(feature = "tls")]
pub fn find_rustls_error<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::Error> {
    let mut cur: Option<&'a (dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(r) = find_rustls_error(inner) {
                    return Some(r);
                }
            }
        }
        cur = err.source();
    }
    None
}

/// Class a failed request's error: `Some` when its source chain holds a
/// TLS error that is the server's answer (a certificate error, an alert,
/// nothing in common). `None` for everything else — a handshake cut, reset
/// or timeout is not a TLS error but an io error, and stays the
/// transport's to class (unjudged before the request was complete).
///
/// Only what happened while connecting is an answer: callers ask this of
/// a connect failure.
///
/// Without the `tls` feature there is no TLS stack, hence no refusal:
/// always `None`.
pub fn tls_refusal(e: &(dyn std::error::Error + 'static)) -> Option<TlsRefusal> {
    #[cfg(feature = "tls")]
    return refusal_of(find_rustls_error(e)?);
    #[cfg(not(feature = "tls"))]
    {
        let _ = e;
        None
    }
}

/// The table: which `rustls::Error`s are the server's answer. (With the
/// `tls` feature.)
#[cfg(feature = "tls")]
pub fn refusal_of(e: &rustls::Error) -> Option<TlsRefusal> {
    use rustls::Error as E;
    Some(match e {
        E::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                TlsRefusal::Untrusted
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => TlsRefusal::Expired,
            CertificateError::NotValidForName => TlsRefusal::OtherName { presented: vec![] },
            CertificateError::NotValidForNameContext { presented, .. } => TlsRefusal::OtherName {
                presented: presented.clone(),
            },
            other => TlsRefusal::Certificate(format!("{other:?}")),
        },
        E::NoCertificatesPresented => TlsRefusal::Certificate("none presented".into()),
        E::UnsupportedNameType => TlsRefusal::Certificate("unsupported name type".into()),
        E::InvalidCertRevocationList(r) => TlsRefusal::Certificate(format!("{r:?}")),
        E::AlertReceived(a) => TlsRefusal::Alert(alert_name(*a)),
        E::PeerIncompatible(p) => TlsRefusal::Incompatible(format!("{p:?}")),
        E::NoApplicationProtocol => TlsRefusal::Incompatible("no application protocol".into()),
        _ => return None,
    })
}

#[cfg(feature = "tls")]
fn alert_name(a: AlertDescription) -> String {
    // `HandshakeFailure` → `handshake failure`.
    let raw = format!("{a:?}");
    let mut out = String::new();
    for (i, ch) in raw.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(ch.to_ascii_lowercase());
    }
    format!("alert {out}")
}

/// A proxy URL without its user info: `http://u:p@host:3128` →
/// `http://host:3128`, as every error and `Debug` output names a proxy.
/// The workspace's one [`redact`], under the name this crate's callers know.
pub fn proxy_name(url: &str) -> String {
    redact(url)
}

/// An answer's request id, as the forge's support asks for it:
/// `x-github-request-id`, else `x-request-id`; `None` when the answer
/// names neither (or names one that is not text). The one reader of it,
/// for the forge's calls and git's smart HTTP alike.
///
/// ```
/// use reqwest::header::{HeaderMap, HeaderValue};
/// let mut h = HeaderMap::new();
/// h.insert("x-request-id", HeaderValue::from_static("abc"));
/// assert_eq!(sluice_https::request_id(&h).as_deref(), Some("abc"));
/// h.insert("x-github-request-id", HeaderValue::from_static("GH:1"));
/// assert_eq!(sluice_https::request_id(&h).as_deref(), Some("GH:1"));
/// ```
pub fn request_id(headers: &reqwest::header::HeaderMap) -> Option<String> {
    ["x-github-request-id", "x-request-id"]
        .iter()
        .find_map(|h| headers.get(*h)?.to_str().ok())
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "tls")]
    #[test]
    fn certificate_errors_and_alerts_are_refusals_and_others_are_not() {
        let e = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert_eq!(refusal_of(&e), Some(TlsRefusal::Untrusted));
        let e = rustls::Error::InvalidCertificate(CertificateError::Expired);
        assert_eq!(refusal_of(&e), Some(TlsRefusal::Expired));
        let e = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        assert_eq!(refusal_of(&e).map(|r| r.kind()), Some("other-name"));
        let e = rustls::Error::AlertReceived(AlertDescription::HandshakeFailure);
        assert_eq!(
            refusal_of(&e),
            Some(TlsRefusal::Alert("alert handshake failure".into()))
        );
        assert_eq!(refusal_of(&rustls::Error::DecryptError), None);
        assert_eq!(refusal_of(&rustls::Error::HandshakeNotComplete), None);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn the_rustls_error_is_found_inside_io_errors_and_wrappers() {
        #[derive(Debug)]
        struct Wrapper(Box<dyn std::error::Error + Send + Sync>);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("connect failed")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&*self.0)
            }
        }
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let outer = Wrapper(Box::new(Wrapper(Box::new(io))));
        assert_eq!(tls_refusal(&outer), Some(TlsRefusal::Untrusted));
        // A handshake cut is an io error without a rustls error: not a refusal.
        let cut = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "tls handshake eof");
        assert_eq!(tls_refusal(&Wrapper(Box::new(cut))), None);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_ca_file_without_a_certificate_is_refused_at_once() {
        let dir = std::env::temp_dir().join(format!("sluice-https-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let e = HttpsConfig::new().with_ca_file(&empty).unwrap_err();
        assert!(matches!(e, HttpsError::Roots { .. }), "{e}");
        let e = HttpsConfig::new()
            .with_ca_file(dir.join("absent.pem"))
            .unwrap_err();
        assert!(e.to_string().contains("absent.pem"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn proxies(vars: &[(&str, &str)]) -> Proxies {
        Proxies::from_vars(|n| {
            vars.iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        })
    }

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).expect("url")
    }

    #[test]
    fn the_environment_is_read_as_curl_reads_it() {
        let p = proxies(&[
            ("HTTPS_PROXY", "proxy.example:3128"),
            ("HTTP_PROXY", "http://cgi-header.example"),
            ("NO_PROXY", ".internal.example, 10.0.0.0/8,127.0.0.1"),
        ]);
        assert_eq!(
            p.for_url(&url("https://github.com/o/r")),
            Some("http://proxy.example:3128")
        );
        // HTTP_PROXY in upper case is never read (curl, httpoxy).
        assert_eq!(p.for_url(&url("http://github.com/o/r")), None);
        for direct in [
            "https://internal.example/x",
            "https://git.internal.example/x",
            "https://10.1.2.3/x",
            "https://127.0.0.1:8443/x",
        ] {
            assert_eq!(p.for_url(&url(direct)), None, "{direct}");
        }
        assert!(p.for_url(&url("https://notinternal.example/x")).is_some());
        assert!(p.for_url(&url("https://11.0.0.1/x")).is_some());

        // Lower case first; all_proxy when the scheme's own is unset.
        let p = proxies(&[
            ("https_proxy", "http://lower:1"),
            ("HTTPS_PROXY", "http://upper:1"),
            ("all_proxy", "http://all:1"),
            ("http_proxy", ""),
        ]);
        assert_eq!(p.for_url(&url("https://h/")), Some("http://lower:1"));
        assert_eq!(p.for_url(&url("http://h/")), Some("http://all:1"));
        let p = proxies(&[("https_proxy", "http://p:1"), ("no_proxy", "*")]);
        assert_eq!(p.for_url(&url("https://h/")), None);
        assert!(proxies(&[]).is_direct());
    }

    #[test]
    fn proxy_user_info_is_never_shown() {
        assert_eq!(
            proxy_name("http://u:secret@proxy.example:3128"),
            "http://proxy.example:3128"
        );
        assert_eq!(proxy_name("http://proxy:3128/x@y"), "http://proxy:3128/x@y");
        let c = HttpsConfig::new()
            .with_proxy(ProxyChoice::Url("http://u:secret@127.0.0.1:9".into()))
            .expect("valid proxy");
        assert!(!format!("{c:?}").contains("secret"));
        let p = c.proxies();
        assert!(!format!("{p:?}").contains("secret"));
        assert_eq!(
            p.named_for(&url("https://h/")).as_deref(),
            Some("http://127.0.0.1:9")
        );
    }
}
