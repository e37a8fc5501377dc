//! rendezvous apply
