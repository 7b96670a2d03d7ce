//! A service's traces of forge calls, sent to an OpenTelemetry collector
//! over OTLP/HTTP: the libraries emit `tracing` spans whose fields carry
//! OpenTelemetry's names (`otel.kind`, `server.address`, `url.full`,
//! `http.request.method`, `http.response.status_code`,
//! `http.request.resend_count`, `error.type`); `tracing-opentelemetry`
//! turns them into OpenTelemetry spans and the OTLP exporter sends them.
//! The caller's own `traceparent` goes on every request of the call, so
//! the forge's side of the trace can be joined.
//!
//! ```text
//! cargo run -p sluice-remote --features otlp --example otlp -- \
//!     https://api.github.com octo/repo 1 [http://127.0.0.1:4318/v1/traces]
//! ```
//!
//! Behind the `otlp` feature (`required-features`): `cargo test
//! --workspace` does not build the OTLP stack.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use sluice_forge::{CallOptions, ForgeClient, RepoRef};
use tracing_subscriber::layer::SubscriberExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (api, repo, number) = match args.as_slice() {
        [api, repo, number, ..] => (api.as_str(), repo.as_str(), number.parse::<u64>()?),
        _ => return Err("usage: otlp <API URL> <OWNER/REPO> <N> [<OTLP traces endpoint>]".into()),
    };
    let endpoint = args
        .get(3)
        .cloned()
        .unwrap_or_else(|| "http://127.0.0.1:4318/v1/traces".to_string());
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(endpoint)
        .build()?;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("sluice-remote")));
    tracing::subscriber::set_global_default(subscriber)?;

    let (owner, name) = repo.split_once('/').ok_or("OWNER/REPO")?;
    let client = ForgeClient::new(api)?;
    // A W3C trace context of the caller's own (a service passes its
    // current one): the forge sees it on every request of the call.
    let opts = CallOptions::new().header(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )?;
    let out = client.get_pull(&RepoRef::new(owner, name), number, &opts)?;
    println!(
        "{}: {} attempt(s), request ids {:?}",
        out.kind.as_str(),
        out.attempts.len(),
        out.attempts
            .iter()
            .map(|a| a.request_id.as_deref())
            .collect::<Vec<_>>()
    );
    provider.shutdown()?;
    Ok(())
}
