//! Token counting of what the host pays for tools, per host rendering.
