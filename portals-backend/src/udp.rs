//! Placeholder: filled by the engine issue.
