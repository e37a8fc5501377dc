//! rendezvous sanitize
