//! The filter language of `retrieve`: parsed and type-checked here, compiled
//! to SQL by the store.
//!
//! A filter is a JSON object; every key is a condition and all must hold:
//!
//! ```json
//! {"type": "event", "metadata.action": "purchase",
//!  "metadata.timestamp": {"$gte": "2026-01-01T00:00:00Z"},
//!  "$or": [{"metadata.outcome": "completed"}, {"metadata.outcome": {"$exists": false}}]}
//! ```
//!
//! - Paths: `type`, `category`, `id`, `indexed`, `created_at`,
//!   `updated_at`, and `metadata.<key>[.<key>...]` (at most
//!   [`MAX_PATH_SEGMENTS`] keys; an array's elements share the array's path,
//!   so equality on an array path means "contains").
//! - Operators: equality (a bare value or `$eq`), `$ne`, `$gt`, `$gte`,
//!   `$lt`, `$lte` (numbers, or RFC 3339 timestamps, compared as instants),
//!   `$in`, `$nin` (arrays of scalars), `$exists` (boolean), and `$and` /
//!   `$or` (arrays of filters). `$ne` and `$nin` also match memories that lack
//!   the path (as in MongoDB).
//! - Anything else is an error that names it: an unknown operator, a range
//!   operator on a string that is not a timestamp, a number compared with a
//!   timestamp path (`metadata.timestamp`, `metadata.observed_at`,
//!   `created_at`, `updated_at`), an object or array where a scalar belongs,
//!   a malformed path. Nothing is silently ignored.

use chrono::DateTime;
use serde_json::Value;

use super::typed::{json_kind, Category, MemoryType};
use crate::error::{Error, Result};

/// Most keys in a `metadata.` path.
pub const MAX_PATH_SEGMENTS: usize = 8;
/// Most conditions in one filter (counting nested ones), so a request
/// cannot build an arbitrarily large SQL statement.
pub const MAX_CONDITIONS: usize = 64;
/// Most values in one `$in` / `$nin`.
pub const MAX_IN_VALUES: usize = 1000;

/// What a condition tests.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// The memory type.
    Type,
    /// The category.
    Category,
    /// The memory id.
    Id,
    /// Whether it is indexed.
    Indexed,
    /// When first remembered (ms since the epoch in storage).
    CreatedAt,
    /// When last changed.
    UpdatedAt,
    /// A metadata path, without the `metadata.` prefix (`attributes.tier`).
    Meta(String),
}

impl Field {
    /// Parses a path.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an unknown top-level name or a malformed
    /// `metadata.` path (empty segment, too deep).
    pub fn parse(path: &str) -> Result<Self> {
        match path {
            "type" => return Ok(Self::Type),
            "category" => return Ok(Self::Category),
            "id" => return Ok(Self::Id),
            "indexed" => return Ok(Self::Indexed),
            "created_at" => return Ok(Self::CreatedAt),
            "updated_at" => return Ok(Self::UpdatedAt),
            _ => {}
        }
        let Some(rest) = path.strip_prefix("metadata.") else {
            return Err(Error::InvalidInput(format!(
                "unknown path {path:?}: use type, category, id, indexed, created_at, updated_at or metadata.<key>"
            )));
        };
        let segs: Vec<&str> = rest.split('.').collect();
        if segs.iter().any(|s| s.trim().is_empty() || s.starts_with('$')) {
            return Err(Error::InvalidInput(format!(
                "malformed path {path:?}: every key between dots must be a non-empty name"
            )));
        }
        if segs.len() > MAX_PATH_SEGMENTS {
            return Err(Error::InvalidInput(format!(
                "path {path:?} has {} keys, more than {MAX_PATH_SEGMENTS}",
                segs.len()
            )));
        }
        Ok(Self::Meta(rest.to_string()))
    }

    /// True for paths that hold RFC 3339 timestamps.
    pub fn is_time(&self) -> bool {
        match self {
            Self::CreatedAt | Self::UpdatedAt => true,
            Self::Meta(p) => matches!(p.as_str(), "timestamp" | "observed_at"),
            _ => false,
        }
    }

    /// The path as written by the caller.
    pub fn display(&self) -> String {
        match self {
            Self::Type => "type".into(),
            Self::Category => "category".into(),
            Self::Id => "id".into(),
            Self::Indexed => "indexed".into(),
            Self::CreatedAt => "created_at".into(),
            Self::UpdatedAt => "updated_at".into(),
            Self::Meta(p) => format!("metadata.{p}"),
        }
    }
}

/// A scalar operand.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// Text (not a timestamp).
    Str(String),
    /// An RFC 3339 timestamp: the text as given and its instant (ms since the epoch).
    Time(String, i64),
    /// A number.
    Num(f64),
    /// A boolean.
    Bool(bool),
    /// JSON null.
    Null,
}

/// As the JSON the caller wrote (error messages quote it so).
impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Str(t) | Self::Time(t, _) => write!(f, "{}", serde_json::Value::String(t.clone())),
            Self::Num(n) => write!(f, "{n}"),
            Self::Bool(b) => write!(f, "{b}"),
            Self::Null => f.write_str("null"),
        }
    }
}

impl Scalar {
    fn from_json(v: &Value, path: &Field, op: &str) -> Result<Self> {
        Ok(match v {
            Value::String(s) => match DateTime::parse_from_rfc3339(s) {
                Ok(t) => Scalar::Time(s.clone(), t.timestamp_millis()),
                Err(_) => Scalar::Str(s.clone()),
            },
            Value::Number(n) => Scalar::Num(n.as_f64().unwrap_or(f64::NAN)),
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Null => Scalar::Null,
            other => {
                return Err(Error::InvalidInput(format!(
                    "{}: {op} takes a scalar (string, number, boolean or null), got {}",
                    path.display(),
                    json_kind(other)
                )))
            }
        })
    }
}

/// Range operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `$gt`
    Gt,
    /// `$gte`
    Gte,
    /// `$lt`
    Lt,
    /// `$lte`
    Lte,
}

impl Cmp {
    /// The SQL operator.
    pub fn sql(self) -> &'static str {
        match self {
            Cmp::Gt => ">",
            Cmp::Gte => ">=",
            Cmp::Lt => "<",
            Cmp::Lte => "<=",
        }
    }
}

/// A parsed, type-checked filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Matches everything (the empty filter).
    All,
    /// Equality (for arrays: contains).
    Eq(Field, Scalar),
    /// Not equal, or the path is absent.
    Ne(Field, Scalar),
    /// A range comparison on a number or a timestamp.
    Range(Field, Cmp, Scalar),
    /// Equal to one of.
    In(Field, Vec<Scalar>),
    /// Equal to none of (or absent).
    Nin(Field, Vec<Scalar>),
    /// The path is present (true) or absent (false).
    Exists(Field, bool),
    /// All hold.
    And(Vec<Filter>),
    /// At least one holds.
    Or(Vec<Filter>),
}

impl Filter {
    /// Parses a filter object (`null` = match all).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the path or operator at fault.
    pub fn parse(v: &Value) -> Result<Self> {
        let mut budget = MAX_CONDITIONS;
        let f = parse_object(v, &mut budget)?;
        Ok(f)
    }

    /// The memory types this filter can match (None = any): lets a
    /// semantic query over events be refused.
    pub fn types(&self) -> Option<Vec<MemoryType>> {
        match self {
            Filter::Eq(Field::Type, Scalar::Str(s)) => MemoryType::parse(s).ok().map(|t| vec![t]),
            Filter::In(Field::Type, v) => Some(
                v.iter()
                    .filter_map(|s| match s {
                        Scalar::Str(s) => MemoryType::parse(s).ok(),
                        _ => None,
                    })
                    .collect(),
            ),
            Filter::Eq(Field::Category, Scalar::Str(s)) => Category::parse(s)
                .ok()
                .map(|c| MemoryType::ALL.into_iter().filter(|t| t.category() == c).collect()),
            Filter::And(fs) => fs.iter().filter_map(|f| f.types()).reduce(|a, b| {
                a.into_iter().filter(|t| b.contains(t)).collect()
            }),
            Filter::Or(fs) => {
                let all: Option<Vec<Vec<MemoryType>>> = fs.iter().map(|f| f.types()).collect();
                all.map(|v| {
                    let mut out: Vec<MemoryType> = v.into_iter().flatten().collect();
                    out.sort();
                    out.dedup();
                    out
                })
            }
            _ => None,
        }
    }
}

fn parse_object(v: &Value, budget: &mut usize) -> Result<Filter> {
    let obj = match v {
        Value::Null => return Ok(Filter::All),
        Value::Object(o) => o,
        other => {
            return Err(Error::InvalidInput(format!(
                "a filter must be a JSON object, got {}",
                json_kind(other)
            )))
        }
    };
    let mut all = Vec::new();
    for (k, v) in obj {
        if *budget == 0 {
            return Err(Error::InvalidInput(format!(
                "filter has more than {MAX_CONDITIONS} conditions"
            )));
        }
        *budget -= 1;
        match k.as_str() {
            "$and" | "$or" => {
                let Value::Array(items) = v else {
                    return Err(Error::InvalidInput(format!(
                        "{k} takes an array of filters, got {}",
                        json_kind(v)
                    )));
                };
                if items.is_empty() {
                    return Err(Error::InvalidInput(format!("{k} must not be empty")));
                }
                let parts = items
                    .iter()
                    .map(|i| parse_object(i, budget))
                    .collect::<Result<Vec<_>>>()?;
                all.push(if k == "$and" {
                    Filter::And(parts)
                } else {
                    Filter::Or(parts)
                });
            }
            op if op.starts_with('$') => {
                return Err(Error::InvalidInput(format!(
                    "unsupported operator {op:?} at the top level: use $and or $or, or a path"
                )))
            }
            path => {
                let field = Field::parse(path)?;
                all.extend(parse_conditions(&field, v, budget)?);
            }
        }
    }
    Ok(match all.len() {
        0 => Filter::All,
        1 => all.pop().expect("one"),
        _ => Filter::And(all),
    })
}

fn parse_conditions(field: &Field, v: &Value, budget: &mut usize) -> Result<Vec<Filter>> {
    match v {
        Value::Object(ops) if ops.keys().all(|k| k.starts_with('$')) && !ops.is_empty() => {
            let mut out = Vec::new();
            for (op, arg) in ops {
                if *budget == 0 {
                    return Err(Error::InvalidInput(format!(
                        "filter has more than {MAX_CONDITIONS} conditions"
                    )));
                }
                *budget -= 1;
                out.push(parse_op(field, op, arg)?);
            }
            Ok(out)
        }
        Value::Object(_) => Err(Error::InvalidInput(format!(
            "{}: equality with an object is not supported; filter on its keys ({}.<key>) or use operators ($eq, $gt...)",
            field.display(),
            field.display()
        ))),
        Value::Array(_) => Err(Error::InvalidInput(format!(
            "{}: equality with an array is not supported; use $in",
            field.display()
        ))),
        scalar => Ok(vec![parse_op(field, "$eq", scalar)?]),
    }
}

fn parse_op(field: &Field, op: &str, arg: &Value) -> Result<Filter> {
    let scalars = |arg: &Value| -> Result<Vec<Scalar>> {
        let Value::Array(items) = arg else {
            return Err(Error::InvalidInput(format!(
                "{}: {op} takes an array, got {}",
                field.display(),
                json_kind(arg)
            )));
        };
        if items.len() > MAX_IN_VALUES {
            return Err(Error::InvalidInput(format!(
                "{}: {op} has {} values, more than {MAX_IN_VALUES}",
                field.display(),
                items.len()
            )));
        }
        items
            .iter()
            .map(|i| check(field, op, Scalar::from_json(i, field, op)?))
            .collect()
    };
    Ok(match op {
        "$eq" => Filter::Eq(field.clone(), check(field, op, Scalar::from_json(arg, field, op)?)?),
        "$ne" => Filter::Ne(field.clone(), check(field, op, Scalar::from_json(arg, field, op)?)?),
        "$in" => Filter::In(field.clone(), scalars(arg)?),
        "$nin" => Filter::Nin(field.clone(), scalars(arg)?),
        "$exists" => match arg {
            Value::Bool(b) => Filter::Exists(field.clone(), *b),
            other => {
                return Err(Error::InvalidInput(format!(
                    "{}: $exists takes true or false, got {}",
                    field.display(),
                    json_kind(other)
                )))
            }
        },
        "$gt" | "$gte" | "$lt" | "$lte" => {
            let cmp = match op {
                "$gt" => Cmp::Gt,
                "$gte" => Cmp::Gte,
                "$lt" => Cmp::Lt,
                _ => Cmp::Lte,
            };
            let s = Scalar::from_json(arg, field, op)?;
            match (&s, field.is_time()) {
                (Scalar::Num(n), false) if n.is_finite() => {}
                (Scalar::Time(..), _) => {}
                (Scalar::Num(_), true) => {
                    return Err(Error::InvalidInput(format!(
                        "{}: holds RFC 3339 timestamps; compare it with a timestamp string such as \"2026-01-01T00:00:00Z\", not a number",
                        field.display()
                    )))
                }
                (Scalar::Str(t), _) => {
                    return Err(Error::InvalidInput(format!(
                        "{}: {op} compares numbers or RFC 3339 timestamps; {t:?} is neither",
                        field.display()
                    )))
                }
                (other, _) => {
                    return Err(Error::InvalidInput(format!(
                        "{}: {op} compares numbers or RFC 3339 timestamps, not {other}",
                        field.display()
                    )))
                }
            }
            if matches!(field, Field::Type | Field::Category | Field::Id | Field::Indexed) {
                return Err(Error::InvalidInput(format!(
                    "{}: {op} does not apply; use equality, $ne, $in or $nin",
                    field.display()
                )));
            }
            Filter::Range(field.clone(), cmp, s)
        }
        other => {
            return Err(Error::InvalidInput(format!(
                "{}: unsupported operator {other:?}; supported: $eq $ne $gt $gte $lt $lte $in $nin $exists (and $and / $or at the top)",
                field.display()
            )))
        }
    })
}

/// Type-checks an equality operand against the top-level fields.
fn check(field: &Field, op: &str, s: Scalar) -> Result<Scalar> {
    let bad = |want: &str| {
        Err(Error::InvalidInput(format!(
            "{}: {op} needs {want}, got {s}",
            field.display()
        )))
    };
    match field {
        Field::Type => match &s {
            Scalar::Str(t) => MemoryType::parse(t).map(|_| s.clone()),
            _ => bad("a type name"),
        },
        Field::Category => match &s {
            Scalar::Str(c) => Category::parse(c).map(|_| s.clone()),
            _ => bad("a category name"),
        },
        Field::Id => match &s {
            Scalar::Str(_) => Ok(s),
            _ => bad("a memory id"),
        },
        Field::Indexed => match &s {
            Scalar::Bool(_) => Ok(s),
            _ => bad("true or false"),
        },
        Field::CreatedAt | Field::UpdatedAt => match &s {
            Scalar::Time(..) => Ok(s),
            _ => bad("an RFC 3339 timestamp"),
        },
        f if f.is_time() => match &s {
            Scalar::Time(..) | Scalar::Null => Ok(s),
            _ => bad("an RFC 3339 timestamp"),
        },
        Field::Meta(_) => match &s {
            Scalar::Num(n) if !n.is_finite() => bad("a finite number"),
            _ => Ok(s),
        },
    }
}

/// A sort order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Smallest / oldest first.
    Asc,
    /// Largest / newest first (default).
    #[default]
    Desc,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        Filter::parse(&v).unwrap_err().to_string()
    }

    #[test]
    fn parses_the_documented_forms() {
        let f = Filter::parse(&json!({"type":"event","metadata.timestamp":{"$gte":"2026-01-01T00:00:00Z"}})).unwrap();
        assert!(matches!(f, Filter::And(ref v) if v.len() == 2));
        assert_eq!(f.types(), Some(vec![MemoryType::Event]));
        let f = Filter::parse(&json!({"$or":[{"type":"fact"},{"type":"entity"}]})).unwrap();
        assert_eq!(f.types(), Some(vec![MemoryType::Fact, MemoryType::Entity]));
        assert_eq!(Filter::parse(&json!({})).unwrap(), Filter::All);
        assert_eq!(Filter::parse(&Value::Null).unwrap(), Filter::All);
        assert!(matches!(
            Filter::parse(&json!({"metadata.attributes.tier":{"$in":["gold","platinum"]}})).unwrap(),
            Filter::In(Field::Meta(ref p), ref v) if p == "attributes.tier" && v.len() == 2
        ));
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        assert!(err(json!({"metadata.x":{"$regex":"a"}})).contains("unsupported operator \"$regex\""));
        assert!(err(json!({"metadata.x":{"$gt":"abc"}})).contains("neither"));
        assert!(err(json!({"metadata.timestamp":{"$gt":5}})).contains("RFC 3339"));
        assert!(err(json!({"metadata..x":1})).contains("malformed path"));
        assert!(err(json!({"colour":1})).contains("unknown path"));
        assert!(err(json!({"metadata.x":[1,2]})).contains("$in"));
        assert!(err(json!({"metadata.x":{"$in":"a"}})).contains("takes an array"));
        assert!(err(json!({"metadata.x":{"$exists":1}})).contains("true or false"));
        assert!(err(json!({"type":"memo"})).contains("unknown memory type"));
        assert!(err(json!({"$nor":[]})).contains("$nor"));
        assert!(err(json!([1])).contains("JSON object"));
        assert!(err(json!({"metadata.x":{"$gt":true}})).contains("compares numbers"));
        assert!(err(json!({"type":{"$gt":"a"}})).contains("neither"));
    }
}
