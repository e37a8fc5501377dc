//! rendezvous ops
