//! The tower layers of the gateway, one module each; [`crate::stack`] orders them.

pub mod authorize;
pub mod budget;
pub mod era;
pub mod guard;
pub mod limit;
pub mod recover;
pub mod trace;
