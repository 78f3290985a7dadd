//! sea-orm entities of gymapi. Every table that holds gym data carries `gym_id`, and every key of
//! such a table (primary, unique, foreign to another such table) leads with it (see `migration`),
//! so the data can be distributed by gym.

pub mod api_key;
pub mod attendance;
pub mod device;
pub mod door_command;
pub mod facility;
pub mod gym;
pub mod gym_counter;
pub mod idempotency_record;
pub mod ids;
pub mod import_counter;
pub mod member;
pub mod member_membership;
pub mod membership_plan;
pub mod payment_job;
pub mod print_job;
pub mod product;
pub mod purchase;
pub mod purchase_line;
pub mod ring;
pub mod states;
pub mod subscription_plan;
pub mod user;
pub mod user_session;
pub mod webhook_delivery;
pub mod webhook_endpoint;
pub mod webhook_event;

pub mod prelude {
    pub use super::{
        api_key::Entity as ApiKey, attendance::Entity as Attendance, facility::Entity as Facility, gym::Entity as Gym,
        import_counter::Entity as ImportCounter, member::Entity as Member,
        member_membership::Entity as MemberMembership, membership_plan::Entity as MembershipPlan,
        product::Entity as Product, purchase::Entity as Purchase, subscription_plan::Entity as SubscriptionPlan,
        user::Entity as User, webhook_delivery::Entity as WebhookDelivery, webhook_endpoint::Entity as WebhookEndpoint,
        webhook_event::Entity as WebhookEvent,
    };
}
