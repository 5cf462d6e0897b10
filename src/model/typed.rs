//! Typed memories: what a backend stores directly (not from a conversation).
//!
//! Four types, each with `content` (text) and typed `metadata`:
//!
//! | type | category | stored in | upsert key |
//! |---|---|---|---|
//! | `fact` | knowledge | record + BM25 + vectors | `metadata.key` (supersedes) |
//! | `event` | event | record only (time-indexed) | none: append-only |
//! | `entity` | entity | record + graph | `metadata.identity_key` (merges) |
//! | `relation` | entity | record + graph edge | (subject, predicate, object) |
//!
//! The category is decided on write ([`MemoryType::category`]) and is what
//! routes a memory to its stores; events have no path to an index or to a
//! shared store ([`Shareable`] has no event variant).
//!
//! Wire form (JSON): `{"type": "fact", "content": "...", "metadata": {...},
//! "indexed": true}` ([`MemoryInput`]); [`NewMemory::try_from`] validates it
//! and names the offending field in its error.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Error, Result};

/// Longest `content` of a typed memory, in bytes (64 KiB): memories are
/// statements, not documents; a longer text is an error, never truncated.
pub const MAX_MEMORY_CONTENT_BYTES: usize = 64 * 1024;
/// Largest `metadata` object, in bytes of its JSON text (64 KiB).
pub const MAX_METADATA_BYTES: usize = 64 * 1024;
/// Deepest nesting of `metadata` (objects and arrays), so every leaf has a
/// filterable path of at most this many segments.
pub const MAX_METADATA_DEPTH: usize = 8;
/// Longest key (fact `key`, entity `identity_key`, relation ends), in bytes.
pub const MAX_KEY_BYTES: usize = 512;

/// A typed memory's id: `mem_` + 32 hex digits (a UUID v7, so ids sort by
/// creation time).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct MemoryId(String);

impl MemoryId {
    /// A fresh id.
    pub fn new() -> Self {
        Self(format!("mem_{}", uuid::Uuid::now_v7().simple()))
    }
    /// Parses a caller's id.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] unless it is `mem_` + 32 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        if super::is_hex_id(s, "mem_") {
            Ok(Self(s.to_string()))
        } else {
            Err(Error::InvalidInput(format!(
                "malformed memory id {s:?}: expected mem_ and 32 hex digits"
            )))
        }
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for MemoryId {
    fn default() -> Self {
        Self::new()
    }
}

impl TryFrom<String> for MemoryId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        Self::parse(&s)
    }
}

impl From<MemoryId> for String {
    fn from(m: MemoryId) -> String {
        m.0
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The four memory types.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MemoryType {
    /// Something true about the user (preference, profile, state).
    Fact,
    /// Something that happened at a time (purchase, click, review). Append-only.
    Event,
    /// A thing with an identity (customer, product, order) and attributes.
    Entity,
    /// A typed, weighted edge between two entities.
    Relation,
}

impl MemoryType {
    /// Every type, in declaration order.
    pub const ALL: [MemoryType; 4] = [Self::Fact, Self::Event, Self::Entity, Self::Relation];
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fact => "fact",
            Self::Event => "event",
            Self::Entity => "entity",
            Self::Relation => "relation",
        }
    }
    /// Parses a stored or caller's name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the four types.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "unknown memory type {s:?}: expected fact, event, entity or relation"
                ))
            })
    }
    /// The plural, for messages ("events", "entities").
    pub fn plural(self) -> &'static str {
        match self {
            Self::Fact => "facts",
            Self::Event => "events",
            Self::Entity => "entities",
            Self::Relation => "relations",
        }
    }
    /// The category this type is stored as (the routing rule).
    pub fn category(self) -> Category {
        match self {
            Self::Fact => Category::Knowledge,
            Self::Event => Category::Event,
            Self::Entity | Self::Relation => Category::Entity,
        }
    }
}

/// How a memory is stored, decided on write from its type.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// System of record + keyword index + vector index; hybrid-searched,
    /// part of `memory_search` and `inject`.
    Knowledge,
    /// System of record + the graph; looked up by `identity_key` and walked.
    Entity,
    /// System of record only, time-indexed; never embedded, never indexed,
    /// never shared.
    Event,
}

impl Category {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Knowledge => "knowledge",
            Self::Entity => "entity",
            Self::Event => "event",
        }
    }
    /// Parses a stored or caller's name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the three categories.
    pub fn parse(s: &str) -> Result<Self> {
        [Self::Knowledge, Self::Entity, Self::Event]
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "unknown category {s:?}: expected knowledge, entity or event"
                ))
            })
    }
}

/// How strongly a fact holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    /// Stated outright ("I always buy Nike").
    Strong,
    /// Inferred or hedged.
    Weak,
    /// Default.
    #[default]
    Neutral,
}

/// A JSON object.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// `metadata` of a fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactMetadata {
    /// What the fact is about ("preference", "profile"...): required, free text.
    pub category: String,
    /// The fact's value, any JSON ("Nike", 42, {...}); optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// Default neutral.
    #[serde(default)]
    pub strength: Strength,
    /// When it was observed (RFC 3339); default: when it was remembered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<DateTime<Utc>>,
    /// A fact whose key is already held supersedes the held one ("favourite_brand").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// `metadata` of an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventMetadata {
    /// When it happened (RFC 3339): required.
    pub timestamp: DateTime<Utc>,
    /// What happened ("purchase", "click", "review"): required.
    pub action: String,
    /// The entity it concerned ("product-456").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// That entity's type ("product").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_type: Option<String>,
    /// How it ended ("completed", "refunded").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Anything else (session id, source...), a JSON object.
    #[serde(default)]
    pub context: JsonObject,
}

/// `metadata` of an entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityMetadata {
    /// The entity's stable key ("customer-42"); `entity_id` is accepted as
    /// a synonym. Required.
    #[serde(alias = "entity_id")]
    pub identity_key: String,
    /// "customer", "product"...: required.
    pub entity_type: String,
    /// Any JSON object; merged field by field with the held entity.
    #[serde(default)]
    pub attributes: JsonObject,
    /// Named lists of other entities' keys (`{"orders": ["o-1", "o-2"]}`);
    /// lists are unioned on merge, and each key becomes a graph edge.
    #[serde(default)]
    pub relations: BTreeMap<String, Vec<String>>,
    /// When these attributes were observed (RFC 3339); default: now. Per
    /// field, the newest observation wins a merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<DateTime<Utc>>,
}

/// `metadata` of a relation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationMetadata {
    /// The subject entity's key: required.
    pub subject: String,
    /// The relation ("purchased", "reviewed"): required.
    pub predicate: String,
    /// The object entity's key: required.
    pub object: String,
    /// The subject's entity type (default "entity").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_type: Option<String>,
    /// The object's entity type (default "entity").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_type: Option<String>,
    /// Weight in 0..=1 (default 1).
    #[serde(default = "one")]
    pub strength: f64,
    /// When it held (RFC 3339); default: now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<DateTime<Utc>>,
    /// Anything else, a JSON object.
    #[serde(default)]
    pub context: JsonObject,
}

fn one() -> f64 {
    1.0
}

/// A memory's type with its validated metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryKind {
    /// See [`FactMetadata`].
    Fact(FactMetadata),
    /// See [`EventMetadata`].
    Event(EventMetadata),
    /// See [`EntityMetadata`].
    Entity(EntityMetadata),
    /// See [`RelationMetadata`].
    Relation(RelationMetadata),
}

impl MemoryKind {
    /// The type.
    pub fn memory_type(&self) -> MemoryType {
        match self {
            Self::Fact(_) => MemoryType::Fact,
            Self::Event(_) => MemoryType::Event,
            Self::Entity(_) => MemoryType::Entity,
            Self::Relation(_) => MemoryType::Relation,
        }
    }
    /// The metadata as a JSON object (what is stored and filtered on).
    pub fn metadata_json(&self) -> serde_json::Value {
        let v = match self {
            Self::Fact(m) => serde_json::to_value(m),
            Self::Event(m) => serde_json::to_value(m),
            Self::Entity(m) => serde_json::to_value(m),
            Self::Relation(m) => serde_json::to_value(m),
        };
        v.unwrap_or(serde_json::Value::Null)
    }
    /// The key an upsert matches on: a fact's `key`, an entity's
    /// `identity_key` (case and spacing folded), a relation's
    /// `subject|predicate|object`; none for events and key-less facts.
    pub fn upsert_key(&self) -> Option<String> {
        match self {
            Self::Fact(m) => m.key.as_ref().map(|k| k.trim().to_string()),
            Self::Event(_) => None,
            Self::Entity(m) => Some(fold_key(&m.identity_key)),
            Self::Relation(m) => Some(format!(
                "{}|{}|{}",
                fold_key(&m.subject),
                fold_key(&m.predicate),
                fold_key(&m.object)
            )),
        }
    }
}

/// Folds a caller's key for matching: trimmed, inner whitespace collapsed, lowercased.
pub fn fold_key(k: &str) -> String {
    k.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// A validated memory to remember.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// The text (a fact's abstract, an event's description...).
    pub content: String,
    /// Type and metadata.
    pub kind: MemoryKind,
    /// `Some(false)` keeps knowledge out of the keyword and vector indexes
    /// (it stays retrievable by filter). `None` = the category's rule.
    /// `Some(true)` on an event or entity is an error: they are never indexed.
    pub indexed: Option<bool>,
}

impl NewMemory {
    /// Whether it goes into the keyword and vector indexes.
    pub fn is_indexed(&self) -> bool {
        self.kind.memory_type().category() == Category::Knowledge && self.indexed != Some(false)
    }
}

/// The wire form of a memory to remember (REST body, MCP and CLI argument).
/// Unknown fields are refused (a typo in `indexed` must not index a fact
/// the caller meant to keep out).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryInput {
    /// `fact`, `event`, `entity` or `relation`.
    #[serde(rename = "type")]
    pub memory_type: String,
    /// The memory's text: not empty, at most 64 KiB.
    pub content: String,
    /// The type's metadata object (see docs/typed-memories.md).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    /// `false` keeps knowledge out of the indexes; omit for the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexed: Option<bool>,
}

fn meta<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            Error::InvalidInput(format!("metadata: {inner}"))
        } else {
            Error::InvalidInput(format!("metadata.{path}: {inner}"))
        }
    })
}

fn required(field: &str, v: &str) -> Result<()> {
    if super::is_blank(v) {
        return Err(Error::InvalidInput(format!(
            "metadata.{field} must not be empty"
        )));
    }
    if v.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidInput(format!(
            "metadata.{field} is {} bytes, longer than {MAX_KEY_BYTES}",
            v.len()
        )));
    }
    Ok(())
}

fn depth(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        serde_json::Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

impl TryFrom<MemoryInput> for NewMemory {
    type Error = Error;
    /// Validates the wire form.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the field: unknown type, empty or
    /// over-long content, metadata that is not an object, a missing or
    /// malformed field (`metadata.timestamp: ...`), an unknown field, a
    /// strength outside 0..=1, `indexed: true` on a type that is never indexed.
    fn try_from(m: MemoryInput) -> Result<Self> {
        let t = MemoryType::parse(m.memory_type.trim())?;
        if super::is_blank(&m.content) {
            return Err(Error::InvalidInput(
                "content must not be empty, whitespace or only invisible characters".into(),
            ));
        }
        if m.content.len() > MAX_MEMORY_CONTENT_BYTES {
            return Err(Error::InvalidInput(format!(
                "content is {} bytes, longer than the {MAX_MEMORY_CONTENT_BYTES}-byte limit",
                m.content.len()
            )));
        }
        let md = match m.metadata {
            serde_json::Value::Null => serde_json::Value::Object(Default::default()),
            v @ serde_json::Value::Object(_) => v,
            other => {
                return Err(Error::InvalidInput(format!(
                    "metadata must be a JSON object, got {}",
                    json_kind(&other)
                )))
            }
        };
        let bytes = md.to_string().len();
        if bytes > MAX_METADATA_BYTES {
            return Err(Error::InvalidInput(format!(
                "metadata is {bytes} bytes, larger than the {MAX_METADATA_BYTES}-byte limit"
            )));
        }
        if depth(&md) > MAX_METADATA_DEPTH {
            return Err(Error::InvalidInput(format!(
                "metadata nests deeper than {MAX_METADATA_DEPTH} levels"
            )));
        }
        let kind = match t {
            MemoryType::Fact => {
                let f: FactMetadata = meta(md)?;
                required("category", &f.category)?;
                if let Some(k) = &f.key {
                    required("key", k)?;
                }
                MemoryKind::Fact(f)
            }
            MemoryType::Event => {
                let e: EventMetadata = meta(md)?;
                required("action", &e.action)?;
                MemoryKind::Event(e)
            }
            MemoryType::Entity => {
                let e: EntityMetadata = meta(md)?;
                required("identity_key", &e.identity_key)?;
                required("entity_type", &e.entity_type)?;
                for (name, keys) in &e.relations {
                    required(&format!("relations.{name}"), name)?;
                    for k in keys {
                        required(&format!("relations.{name}[]"), k)?;
                    }
                }
                MemoryKind::Entity(e)
            }
            MemoryType::Relation => {
                let r: RelationMetadata = meta(md)?;
                required("subject", &r.subject)?;
                required("predicate", &r.predicate)?;
                required("object", &r.object)?;
                if !(0.0..=1.0).contains(&r.strength) || r.strength.is_nan() {
                    return Err(Error::InvalidInput(format!(
                        "metadata.strength must be within 0..=1, got {}",
                        r.strength
                    )));
                }
                MemoryKind::Relation(r)
            }
        };
        if m.indexed == Some(true) && t.category() != Category::Knowledge {
            return Err(Error::InvalidInput(format!(
                "indexed: true is not allowed on {}: only knowledge (facts) is indexed; {} memories are never embedded",
                t.plural(),
                t.category().as_str()
            )));
        }
        Ok(NewMemory {
            content: m.content,
            kind,
            indexed: m.indexed,
        })
    }
}

/// The JSON kind of a value, for error messages.
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Where a memory lives (and, in results, where it came from).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "visibility", content = "team_id", rename_all = "snake_case")]
pub enum Visibility {
    /// The owner's private store (default).
    Private,
    /// A team's store; members are configured in `[teams]`.
    Team(String),
    /// The public store of the agent: every user of the agent reads it.
    Public,
}

impl Visibility {
    /// `private`, `team:<id>` or `public`: how results name their source.
    pub fn label(&self) -> String {
        match self {
            Self::Private => "private".into(),
            Self::Team(t) => format!("team:{t}"),
            Self::Public => "public".into(),
        }
    }
}

/// Which stores a read covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadVisibility {
    /// The caller's private store only (default).
    #[default]
    Private,
    /// Private + every team the user belongs to + public, merged.
    All,
}

/// The types a team or public store can hold. Events and messages have no
/// variant, so no code can put one there.
#[derive(Debug, Clone, PartialEq)]
pub enum Shareable {
    /// A fact, shared by copy.
    Knowledge(FactMetadata),
    /// An entity, federated with the team's entity of the same key.
    Entity(EntityMetadata),
    /// A relation, upserted on (subject, predicate, object).
    Relation(RelationMetadata),
}

impl TryFrom<MemoryKind> for Shareable {
    type Error = Error;
    /// # Errors
    /// [`Error::InvalidInput`] for an event: events are structurally private.
    fn try_from(k: MemoryKind) -> Result<Self> {
        match k {
            MemoryKind::Fact(f) => Ok(Self::Knowledge(f)),
            MemoryKind::Entity(e) => Ok(Self::Entity(e)),
            MemoryKind::Relation(r) => Ok(Self::Relation(r)),
            MemoryKind::Event(_) => Err(Error::InvalidInput(
                "events cannot be shared: they stay in the owner's private store".into(),
            )),
        }
    }
}

impl Shareable {
    /// Back to a memory kind (for storage and indexing).
    pub fn into_kind(self) -> MemoryKind {
        match self {
            Self::Knowledge(f) => MemoryKind::Fact(f),
            Self::Entity(e) => MemoryKind::Entity(e),
            Self::Relation(r) => MemoryKind::Relation(r),
        }
    }
}

/// A stored typed memory, as reads return it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StoredMemory {
    /// Id (in its store).
    pub id: MemoryId,
    /// Type.
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// Category decided on write.
    pub category: Category,
    /// Whether it is in the keyword and vector indexes.
    pub indexed: bool,
    /// Text.
    pub content: String,
    /// Metadata object (for entities: the merged attributes, and
    /// `provenance` per attribute: when and from which write it came).
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    /// When first remembered.
    pub created_at: DateTime<Utc>,
    /// When last changed (merge, upsert).
    pub updated_at: DateTime<Utc>,
    /// When a newer fact with the same key replaced it; None while current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_at: Option<DateTime<Utc>>,
    /// How often reads returned this copy.
    pub recall_count: u64,
    /// Where it came from: private, a team, public.
    #[schema(value_type = String, example = "team:sales")]
    #[serde(serialize_with = "serialize_label")]
    pub source: Visibility,
    /// In a team or public store: the user who shared it (provenance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_by: Option<String>,
    /// Semantic score (cosine in -1..=1) when the read had a `query`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
}

/// Serialises a [`Visibility`] as its [`Visibility::label`] (`"team:sales"`).
pub fn serialize_label<S: serde::Serializer>(v: &Visibility, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&v.label())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<NewMemory> {
        NewMemory::try_from(serde_json::from_value::<MemoryInput>(v).unwrap())
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse(json!({"type":"event","content":"bought","metadata":{"action":"purchase"}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("timestamp"), "{e}");
        let e = parse(json!({"type":"event","content":"bought","metadata":{"action":"purchase","timestamp":"yesterday"}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("metadata.timestamp"), "{e}");
        let e = parse(json!({"type":"relation","content":"x","metadata":{"subject":"a","predicate":"p","object":"b","strength":1.5}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("metadata.strength") && e.contains("0..=1"), "{e}");
        let e = parse(json!({"type":"memo","content":"x"})).unwrap_err().to_string();
        assert!(e.contains("unknown memory type"), "{e}");
        let e = parse(json!({"type":"fact","content":"x","metadata":[1]})).unwrap_err().to_string();
        assert!(e.contains("metadata must be a JSON object"), "{e}");
        let e = parse(json!({"type":"fact","content":"x","metadata":{"category":"p","colour":1}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        let e = parse(json!({"type":"fact","content":"  ","metadata":{"category":"p"}})).unwrap_err().to_string();
        assert!(e.contains("content"), "{e}");
        let e = parse(json!({"type":"event","content":"x","indexed":true,"metadata":{"action":"a","timestamp":"2026-01-01T00:00:00Z"}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("never embedded"), "{e}");
        // a typo in `indexed` is refused, not ignored (the fact would be indexed)
        let typo = serde_json::from_value::<MemoryInput>(json!({"type":"fact","content":"x","indexd":false,"metadata":{"category":"c"}}));
        assert!(typo.unwrap_err().to_string().contains("indexd"));
    }

    #[test]
    fn categories_and_keys() {
        let m = parse(json!({"type":"entity","content":"Ann","metadata":{"entity_id":" Customer  42 ","entity_type":"customer"}})).unwrap();
        assert_eq!(m.kind.memory_type().category(), Category::Entity);
        assert_eq!(m.kind.upsert_key().as_deref(), Some("customer 42"));
        assert!(!m.is_indexed());
        let f = parse(json!({"type":"fact","content":"likes Nike","indexed":false,"metadata":{"category":"preference"}})).unwrap();
        assert!(!f.is_indexed());
        assert!(Shareable::try_from(parse(json!({"type":"event","content":"x","metadata":{"action":"a","timestamp":"2026-01-01T00:00:00Z"}})).unwrap().kind).is_err());
        let id = MemoryId::new();
        assert_eq!(MemoryId::parse(id.as_str()).unwrap(), id);
        assert!(MemoryId::parse("mem_zz").is_err());
    }
}
