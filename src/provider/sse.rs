//! Server-sent events: placeholder.
