//! The writes' rules beyond the schema, asked by the gate when the schema refuses a body: the
//! problems of what still parsed join the schema's in one 422 (openapi.yaml, "Errors").

use entity::ids::{GymId, MemberId};
use futures_util::future::BoxFuture;
use poem_openapi::types::ParseFromJSON;
use serde_json::Value;
use uuid::Uuid;

use crate::openapi::*;
use crate::{
    contract::Rules,
    errors::{ApiError, FieldErrors},
    import,
    members::{self, Claims},
    state::AppState,
};

/// The integration API's [`Rules`]: members' emails, cards and facilities, and import batches.
pub struct WriteRules {
    state: AppState,
}

impl WriteRules {
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

impl Rules for WriteRules {
    fn check<'a>(
        &'a self,
        operation: &'a str,
        gym_id: GymId,
        path: &'a str,
        body: &'a Value,
        refused: &'a FieldErrors,
    ) -> BoxFuture<'a, FieldErrors> {
        Box::pin(async move {
            let db = &self.state.db;
            let outcome = match operation {
                "createMember" => member(db, gym_id, None, body, refused).await,
                "replaceMember" | "updateMember" => {
                    let id = path.rsplit('/').next().and_then(|id| id.parse::<MemberId>().ok());
                    member(db, gym_id, id, body, refused).await
                }
                "importFacilities" => rows(body, refused, |r| import::facilities(db, gym_id, r, true)).await,
                "importPlans" => rows(body, refused, |r| import::plans(db, gym_id, r, true)).await,
                "importMembers" => rows(body, refused, |r| import::members(db, gym_id, r, true)).await,
                "importMemberships" => rows(body, refused, |r| import::memberships(db, gym_id, r, true)).await,
                "importAttendance" => {
                    rows(body, refused, |r| import::attendance(db, gym_id, ImportEntity::Attendance, r, true)).await
                }
                "importAccessLogs" => {
                    rows(body, refused, |r| import::attendance(db, gym_id, ImportEntity::AccessLogs, r, true)).await
                }
                "importProducts" => rows(body, refused, |r| import::products(db, gym_id, r, true)).await,
                "importPurchases" => rows(body, refused, |r| import::purchases(db, gym_id, r, true)).await,
                _ => Ok(()),
            };
            match outcome {
                Err(ApiError::Validation(problems)) => problems,
                // Anything else (the database out of reach) is the handler's to meet, if the
                // client sends the request again corrected; the schema's 422 stands alone.
                _ => FieldErrors::new(),
            }
        })
    }
}

/// A member's rules, on the fields of `body` the schema did not refuse.
async fn member(
    db: &crate::db::Db,
    gym_id: GymId,
    member_id: Option<MemberId>,
    body: &Value,
    refused: &FieldErrors,
) -> Result<(), ApiError> {
    let text = |field: &str| body.get(field).and_then(Value::as_str).filter(|_| !refused.0.contains_key(field));
    let claims = Claims {
        member_id,
        email: text("email"),
        access_card: text("access_card"),
        facility_id: text("facility_id").and_then(|id| Uuid::parse_str(id).ok()),
    };
    members::check(db, gym_id, claims).await
}

/// An import batch's rules, on the rows of `body` the schema did not refuse, as a dry run; their
/// problems named by each row's place in the whole batch.
async fn rows<T, F, Fut>(body: &Value, refused: &FieldErrors, import: F) -> Result<(), ApiError>
where
    T: ParseFromJSON,
    F: FnOnce(Vec<T>) -> Fut,
    Fut: Future<Output = Result<ImportResult, ApiError>>,
{
    let mut places = Vec::new();
    let mut parsed = Vec::new();
    for (i, row) in body.get("rows").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let here = format!("rows.{i}");
        let named = refused.0.keys().any(|k| k == &here || k.starts_with(&format!("{here}.")));
        if let (false, Ok(row)) = (named, T::parse_from_json(Some(row.clone()))) {
            places.push(i);
            parsed.push(row);
        }
    }
    if parsed.is_empty() {
        return Ok(());
    }
    match import(parsed).await {
        Err(ApiError::Validation(problems)) => Err(ApiError::Validation(import::in_batch(problems, &places))),
        other => other.map(|_| ()),
    }
}
