//! The front desk's devices and what they do, whoever asks (the device API, the settings area, the
//! CLI, the demo): the registry and heartbeats of [`devices`], the door's access decisions of
//! [`door`], the doorbell's rings and the doors' commands of [`bell`], and the counter: orders and
//! their sales ([`sales`]), the card terminals' payments ([`terminal`]) and the fiscal printers'
//! receipts ([`printer`]); what waits for each device ([`queues`]).

pub mod bell;
pub mod devices;
pub mod door;
pub mod printer;
pub mod queues;
pub mod sales;
pub mod terminal;
