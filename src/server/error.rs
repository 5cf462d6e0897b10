//! The one error shape of the HTTP API, `{"error": {"code", "message"}}`,
//! and the mapping from the library's [`Error`] (an exhaustive `match`, so a
//! new variant cannot ship without a status) and from axum's rejections.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::Error;

/// The error body.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// Code and message of an error.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code: `invalid_input`, `malformed_json`,
    /// `invalid_body`, `unsupported_media_type`, `payload_too_large`, `not_acceptable`,
    /// `unauthenticated`, `forbidden`, `not_found`, `no_route`,
    /// `method_not_allowed`, `conflict`, `rate_limited`, `overloaded`,
    /// `timeout`, `shutting_down`, `unavailable`, `internal`.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

/// An HTTP error: status, code, message, and an optional `Retry-After` (s).
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code (see [`ErrorDetail::code`]).
    pub code: &'static str,
    /// Message.
    pub message: String,
    /// Seconds for a `Retry-After` header (429, 503).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with no `Retry-After`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// A 503 with `Retry-After: 1` (overload, timeout, shutdown).
    pub fn unavailable(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            retry_after: Some(1),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
        }
    }

    /// The 403 every out-of-scope request gets: the same body whether the
    /// scope exists or not.
    pub fn forbidden() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this API key does not cover the requested scope or operation",
        )
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        use StatusCode as S;
        let (status, code) = match &e {
            Error::InvalidInput(_) => (S::BAD_REQUEST, "invalid_input"),
            Error::NotFound(_) => (S::NOT_FOUND, "not_found"),
            Error::Unauthenticated(_) => (S::UNAUTHORIZED, "unauthenticated"),
            Error::Forbidden(_) => (S::FORBIDDEN, "forbidden"),
            Error::Conflict(_) => (S::CONFLICT, "conflict"),
            Error::RateLimited { .. } => (S::TOO_MANY_REQUESTS, "rate_limited"),
            Error::Shutdown => (S::SERVICE_UNAVAILABLE, "shutting_down"),
            // a failing embedder is a dependency that is down or slow, not our bug
            Error::Embedder(_) | Error::Unavailable { .. } => (S::SERVICE_UNAVAILABLE, "unavailable"),
            Error::Config(_)
            | Error::Sqlite(_)
            | Error::Postgres(_)
            | Error::GraphServer(_)
            | Error::Keyword(_)
            | Error::Vector(_)
            | Error::Chat(_)
            | Error::Webhook(_)
            | Error::Io(_)
            | Error::Json(_)
            | Error::Data(_)
            | Error::Task(_) => (S::INTERNAL_SERVER_ERROR, "internal"),
        };
        if status.is_server_error() {
            tracing::error!(error = %e, status = status.as_u16(), "request failed");
        }
        let retry_after = match &e {
            Error::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            Error::Shutdown | Error::Embedder(_) | Error::Unavailable { .. } => Some(1),
            _ => None,
        };
        // the library's Forbidden messages name only what the caller asked
        // for (their own user id, the team they named); an empty one is the
        // key check's, which says nothing about the target
        let message = match &e {
            Error::Forbidden(m) if m.is_empty() => ApiError::forbidden().message,
            other => other.to_string(),
        };
        ApiError {
            status,
            code,
            message,
            retry_after,
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        use StatusCode as S;
        let (status, code) = match &r {
            JsonRejection::JsonDataError(_) => (S::UNPROCESSABLE_ENTITY, "invalid_body"),
            JsonRejection::JsonSyntaxError(_) => (S::UNPROCESSABLE_ENTITY, "malformed_json"),
            JsonRejection::MissingJsonContentType(_) => {
                (S::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            JsonRejection::BytesRejection(_) if r.status() == S::PAYLOAD_TOO_LARGE => {
                (S::PAYLOAD_TOO_LARGE, "payload_too_large")
            }
            _ => (r.status(), "invalid_body"),
        };
        ApiError::new(status, code, r.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", r.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"strata\""),
            );
        }
        resp
    }
}

/// Handler result.
pub type ApiResult<T> = std::result::Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_errors_map_to_statuses() {
        let cases = [
            (Error::InvalidInput("x".into()), 400, "invalid_input"),
            (Error::NotFound("x".into()), 404, "not_found"),
            (Error::Unauthenticated("x".into()), 401, "unauthenticated"),
            (Error::Forbidden("which user".into()), 403, "forbidden"),
            (Error::Conflict("x".into()), 409, "conflict"),
            (
                Error::RateLimited {
                    retry_after_secs: 2,
                },
                429,
                "rate_limited",
            ),
            (Error::Shutdown, 503, "shutting_down"),
            (Error::Task("x".into()), 500, "internal"),
        ];
        for (e, status, code) in cases {
            let a = ApiError::from(e);
            assert_eq!((a.status.as_u16(), a.code), (status, code));
        }
        // a key check's refusal says nothing about the target; a library
        // refusal (team membership) says why
        assert_eq!(
            ApiError::from(Error::Forbidden(String::new())).message,
            ApiError::forbidden().message
        );
        assert!(ApiError::from(Error::Forbidden("not a member of team \"sales\"".into()))
            .message
            .contains("not a member of team"));
    }
}
