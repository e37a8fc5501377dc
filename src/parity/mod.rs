//! parity
