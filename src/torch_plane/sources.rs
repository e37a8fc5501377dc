//! The host's Python sources, carried in the binary and written out once per content.
