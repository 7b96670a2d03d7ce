//! A capturing `tracing` subscriber: every event with its level, target,
//! message, fields, the thread it was logged on, and the spans it was in
//! (root first, each with its fields as they stood at the event), so a test
//! can check which operation and attempt each event belongs to.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A span an event was in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanSeen {
    /// The span's name (`operation`, `attempt`, ...).
    pub name: String,
    /// Its fields recorded so far, values as `Display` (strings bare) or
    /// `Debug`.
    pub fields: BTreeMap<String, String>,
}

/// One captured event.
#[derive(Clone, Debug)]
pub struct EventSeen {
    /// The event's level.
    pub level: Level,
    /// Its target (the module path of where it was logged).
    pub target: String,
    /// Its message.
    pub message: String,
    /// Its other fields.
    pub fields: BTreeMap<String, String>,
    /// The name of the thread it was logged on (or its id when unnamed).
    pub thread: String,
    /// The spans it was in, root first.
    pub spans: Vec<SpanSeen>,
}

impl EventSeen {
    /// The innermost span named `name` the event was in.
    pub fn span(&self, name: &str) -> Option<&SpanSeen> {
        self.spans.iter().rev().find(|s| s.name == name)
    }

    /// Field `field` of the innermost span named `span`.
    pub fn span_field(&self, span: &str, field: &str) -> Option<&str> {
        self.span(span)?.fields.get(field).map(String::as_str)
    }
}

/// Collects every event; clone it to read what was captured.
#[derive(Clone, Default)]
pub struct Capture {
    events: Arc<Mutex<Vec<EventSeen>>>,
}

impl Capture {
    /// An empty capture.
    pub fn new() -> Capture {
        Capture::default()
    }

    /// A subscriber (every level) that captures into this.
    pub fn subscriber(&self) -> impl Subscriber + Send + Sync + 'static {
        tracing_subscriber::registry().with(CaptureLayer {
            events: Arc::clone(&self.events),
        })
    }

    /// Every event captured so far, in order.
    pub fn events(&self) -> Vec<EventSeen> {
        self.events.lock().expect("capture lock").clone()
    }
}

struct CaptureLayer {
    events: Arc<Mutex<Vec<EventSeen>>>,
}

/// A span's fields, kept in its extensions.
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S> Layer<S> for CaptureLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let mut ext = span.extensions_mut();
            if let Some(fields) = ext.get_mut::<Fields>() {
                values.record(fields);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        let spans = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .from_root()
                    .map(|span| SpanSeen {
                        name: span.name().to_string(),
                        fields: span
                            .extensions()
                            .get::<Fields>()
                            .map(|f| f.0.clone())
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let thread = std::thread::current();
        let seen = EventSeen {
            level: *event.metadata().level(),
            target: event.metadata().target().to_string(),
            message,
            fields: fields.0,
            thread: thread
                .name()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{:?}", thread.id())),
            spans,
        };
        self.events.lock().expect("capture lock").push(seen);
    }
}
