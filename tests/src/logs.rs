//! What the SDK logs, captured for tests that assert on it.

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing::Level;

/// A sink for log lines: make a subscriber with [`CapturedLogs::subscriber`], install it
/// (scoped or global), then read everything it wrote with [`CapturedLogs::text`].
#[derive(Clone, Debug, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// A plain-text (no ANSI colours) subscriber writing every event at or above `level`'s
    /// verbosity threshold into this sink.
    pub fn subscriber(&self, level: Level) -> impl tracing::Subscriber + Send + Sync + 'static {
        let sink = self.clone();
        tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish()
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned()
    }
}

impl Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
