//! rendezvous
