//! The front desk's devices and what they do, whoever asks (the device API, the settings area, the
//! CLI, the demo): the registry and heartbeats of [`devices`], the door's access decisions of
//! [`door`], and the doorbell's rings and the doors' commands of [`bell`].

pub mod bell;
pub mod devices;
pub mod door;
