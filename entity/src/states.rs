//! The closed sets of values stored in text columns (statuses, kinds, roles), as types. A value
//! outside its set read from the database is an error, never a default.

use sea_orm::entity::prelude::*;

/// Declares a state stored as its text value: a sea-orm active enum with `as_str`, `parse` and
/// `ALL`, serialised as the same text.
macro_rules! states {
    ($($(#[$meta:meta])* $name:ident { $($variant:ident = $value:literal),+ $(,)? })+) => {$(
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, serde::Serialize, serde::Deserialize,
        )]
        #[sea_orm(rs_type = "String", db_type = "Text")]
        pub enum $name {
            $(#[sea_orm(string_value = $value)] #[serde(rename = $value)] $variant,)+
        }

        impl $name {
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The stored text.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $value,)+
                }
            }

            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($value => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }
    )+};
}

states! {
    /// A member's status.
    MemberStatus { Active = "active", Inactive = "inactive" }

    /// A membership or subscription plan's status: an inactive plan is no longer sold.
    PlanStatus { Active = "active", Inactive = "inactive" }

    /// A product's status: an inactive product is archived.
    ProductStatus { Active = "active", Inactive = "inactive" }

    /// What an attendance entry records: a check-in, or a door access event.
    AttendanceKind { CheckIn = "check_in", Access = "access" }

    /// Whether the member was let in.
    AttendanceStatus { Granted = "granted", Denied = "denied" }

    /// A sale's payment.
    PaymentStatus { Pending = "pending", Paid = "paid", Failed = "failed", Cancelled = "cancelled", Refunded = "refunded" }

    /// How often a subscription plan bills.
    BillingInterval { Week = "week", Month = "month", Year = "year" }

    /// The gym's own subscription to gymapi: `unpaid`, or `past_due` past its grace period, blocks
    /// requests (402).
    SubscriptionStatus { Active = "active", PastDue = "past_due", Unpaid = "unpaid" }

    /// A gym user's role: owners hold every permission, employees those granted to them.
    Role { Owner = "owner", Employee = "employee" }

    /// Which data an API key acts on: the gym's (live) or its sandbox's (test).
    Environment { Live = "live", Test = "test" }

    /// A webhook delivery's state.
    DeliveryStatus { Pending = "pending", Delivered = "delivered", Failed = "failed" }

    /// What a front-desk device is.
    DeviceKind {
        Door = "door",
        Doorbell = "doorbell",
        CardTerminal = "card_terminal",
        FiscalPrinter = "fiscal_printer",
        Kiosk = "kiosk",
    }

    /// What a door is told to do.
    DoorAction { Open = "open" }

    /// A door command: `pending` until handed out (`delivered`), then as the door reports it. A
    /// stored `pending` past `expires_at` reads as `expired`: it is never handed out.
    CommandState {
        Pending = "pending",
        Delivered = "delivered",
        Executed = "executed",
        Failed = "failed",
        Expired = "expired",
    }

    /// A sale's payment at a card terminal: `pending` until a terminal takes it (`reserved`, until
    /// `reserved_until`; a reservation past its time reads as `pending` and is offered again), then
    /// `approved` or `declined` as the terminal reports; `cancelled` with its order. `refund_due`
    /// is a card charge a terminal reported on a payment it no longer held: recorded, never the
    /// sale's payment, money to give back.
    PaymentJobState {
        Pending = "pending",
        Reserved = "reserved",
        Approved = "approved",
        Declined = "declined",
        Cancelled = "cancelled",
        RefundDue = "refund_due",
    }

    /// A receipt at a fiscal printer: `pending` until a printer takes it (`delivered`, never handed
    /// out again), then `printed` or `failed` as the printer reports.
    PrintJobState { Pending = "pending", Delivered = "delivered", Printed = "printed", Failed = "failed" }

    /// A ring: `pending` until answered; a stored `pending` past `expires_at` reads as `expired`.
    RingState { Pending = "pending", Opened = "opened", Dismissed = "dismissed", Expired = "expired" }
}
