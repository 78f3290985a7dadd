//! The Redis store: one round trip per request (a Lua script), the same verdict for every instance.

use std::time::Duration;

use redis::{Script, aio::ConnectionManager};

use super::{
    Decision, IDEMPOTENCY_LOCK, IdempotencyRecord, IdempotencyState, RatePolicy, Store, StoreError, StoredResponse,
    retry_after_secs,
};

/// Sliding log in a sorted set scored by Redis's own clock (so instances with skewed clocks agree).
/// Returns {allowed, remaining, wait_ms}.
const SLIDING_LOG: &str = r#"
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local used = redis.call('ZCARD', key)
if used < limit then
  redis.call('ZADD', key, now, t[1] .. t[2] .. ':' .. ARGV[3])
  redis.call('PEXPIRE', key, window)
  return {1, limit - used - 1, 0}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, 0, tonumber(oldest[2]) + window - now}
"#;

/// Reserves an unknown key (for ARGV[2] ms) or reports what it holds. The record is JSON:
/// {"fingerprint": ..., "response": null | {...}}. Returns {state, record-or-empty}.
const IDEMPOTENCY_BEGIN: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], cjson.encode({fingerprint = ARGV[1]}), 'PX', ARGV[2])
  return {'started', ''}
end
local record = cjson.decode(v)
if record.fingerprint ~= ARGV[1] then return {'mismatch', ''} end
if record.response == nil or record.response == cjson.null then return {'running', ''} end
return {'replay', v}
"#;

pub struct RedisStore {
    conn: ConnectionManager,
    script: Script,
    begin: Script,
    prefix: String,
    timeout: Duration,
}

impl RedisStore {
    /// Connects (bounded by `timeout`). Keys are `<prefix>rl:{<bucket>}`: the hash tag keeps each
    /// bucket on one Redis Cluster slot.
    pub async fn connect(url: &str, prefix: &str, timeout: Duration) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(|e| StoreError::Backend(e.to_string()))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1);
        let conn = tokio::time::timeout(timeout * 2, ConnectionManager::new_with_config(client, config))
            .await
            .map_err(|_| StoreError::Timeout(timeout))?
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        Ok(Self {
            conn,
            script: Script::new(SLIDING_LOG),
            begin: Script::new(IDEMPOTENCY_BEGIN),
            prefix: prefix.to_string(),
            timeout,
        })
    }

    /// `<prefix>idem:{<scope>}:<rest>`: the tenant part of the key is the hash tag.
    fn idempotency_key(&self, key: &str) -> String {
        match key.split_once(':') {
            Some((scope, rest)) => format!("{}idem:{{{scope}}}:{rest}", self.prefix),
            None => format!("{}idem:{{{key}}}", self.prefix),
        }
    }

    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))?
            .map_err(|e| StoreError::Backend(e.to_string()))
    }
}

#[async_trait::async_trait]
impl Store for RedisStore {
    async fn hit(&self, bucket: &str, policy: RatePolicy) -> Result<Decision, StoreError> {
        let key = format!("{}rl:{{{bucket}}}", self.prefix);
        let nonce: u64 = rand::random();
        let mut conn = self.conn.clone();
        let mut invocation = self.script.key(key);
        invocation.arg(policy.limit).arg(policy.window.as_millis() as u64).arg(nonce);
        let call = invocation.invoke_async::<(i64, i64, i64)>(&mut conn);
        let (allowed, remaining, wait_ms) = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))?
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        Ok(Decision {
            allowed: allowed == 1,
            limit: policy.limit,
            remaining: remaining.max(0) as u32,
            retry_after_secs: if allowed == 1 { 0 } else { retry_after_secs(wait_ms) },
        })
    }

    async fn idempotency_begin(&self, key: &str, fingerprint: &str) -> Result<IdempotencyState, StoreError> {
        let mut conn = self.conn.clone();
        let mut invocation = self.begin.key(self.idempotency_key(key));
        invocation.arg(fingerprint).arg(IDEMPOTENCY_LOCK.as_millis() as u64);
        let (state, record): (String, String) = self.bounded(invocation.invoke_async(&mut conn)).await?;
        Ok(match state.as_str() {
            "started" => IdempotencyState::Started,
            "running" => IdempotencyState::Running,
            "mismatch" => IdempotencyState::Mismatch,
            _ => {
                let record: IdempotencyRecord = serde_json::from_str(&record)
                    .map_err(|e| StoreError::Backend(format!("corrupt idempotency record: {e}")))?;
                match record.response {
                    Some(r) => IdempotencyState::Replay(r),
                    None => IdempotencyState::Running,
                }
            }
        })
    }

    async fn idempotency_complete(
        &self,
        key: &str,
        fingerprint: &str,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let record = IdempotencyRecord { fingerprint: fingerprint.to_string(), response: Some(response.clone()) };
        let value = serde_json::to_string(&record).map_err(|e| StoreError::Backend(e.to_string()))?;
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.idempotency_key(key)).arg(value).arg("PX").arg(ttl.as_millis().max(1) as u64);
        self.bounded(cmd.query_async::<()>(&mut conn)).await
    }

    async fn idempotency_abort(&self, key: &str) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.idempotency_key(key));
        self.bounded(cmd.query_async::<()>(&mut conn)).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let ping = redis::cmd("PING");
        let call = ping.query_async::<String>(&mut conn);
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))?
            .map(|_| ())
            .map_err(|e| StoreError::Backend(e.to_string()))
    }

    fn name(&self) -> &'static str {
        "redis"
    }
}
