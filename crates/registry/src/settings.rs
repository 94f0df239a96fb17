//! The settings an admin changes at run time: the few every tool shares,
//! plus settings of one tool each, declared and typed by that tool.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::{ApprovalRules, RateLimitOverride};

/// Settings an admin changes at run time (stored in PostgreSQL, read per
/// request so every replica sees a change on its next request). They read
/// and write as one flat JSON object, the tools' own settings beside the
/// shared ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Whether web_search is offered at all (off until an admin switches it on).
    pub web_search_enabled: bool,
    /// Whether fetch_web_page is offered (on unless an admin switches it off).
    pub fetch_web_page_enabled: bool,
    /// Per-tool changes to the cooldowns and daily limits in the tools'
    /// metadata, by tool name (`{"query_documents": {"daily_limit": 5000}}`).
    pub tool_rate_limits: BTreeMap<String, RateLimitOverride>,
    /// Which tools ask a person before they run in a chat run, beyond
    /// those whose annotations or the gate say so.
    pub approvals: ApprovalRules,
    /// Settings that belong to one tool, read through [`Settings::get`].
    pub tools: ToolSettings,
}

/// The settings that belong to one tool each, by key, as JSON: the registry
/// does not know their types, the tool's [`ToolSetting`] does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSettings(BTreeMap<&'static str, ToolValue>);

impl Default for Settings {
    fn default() -> Self {
        Settings {
            web_search_enabled: false,
            fetch_web_page_enabled: true,
            tool_rate_limits: BTreeMap::new(),
            approvals: ApprovalRules::default(),
            tools: ToolSettings::default(),
        }
    }
}

/// The keys of the settings every tool shares.
const SHARED: [&str; 4] = [
    "web_search_enabled",
    "fetch_web_page_enabled",
    "tool_rate_limits",
    "approvals",
];

/// A setting that belongs to one tool, named by its key and typed by `T`.
/// Keys and URLs are the deployment's configuration, never settings: admins
/// read settings back.
pub struct ToolSetting<T> {
    key: &'static str,
    value: PhantomData<fn() -> T>,
}

impl<T> ToolSetting<T> {
    pub const fn new(key: &'static str) -> Self {
        ToolSetting {
            key,
            value: PhantomData,
        }
    }

    pub fn key(&self) -> &'static str {
        self.key
    }
}

/// A tool's setting as the registry keeps it: its value, and the check a
/// new value must pass (that it reads as the tool's type).
#[derive(Clone)]
struct ToolValue {
    value: Value,
    check: fn(&Value) -> Result<(), serde_json::Error>,
}

impl fmt::Debug for ToolValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

impl PartialEq for ToolValue {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Eq for ToolValue {}

fn reads_as<T: DeserializeOwned>(value: &Value) -> Result<(), serde_json::Error> {
    T::deserialize(value).map(drop)
}

/// Why a change to the settings was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("unknown setting {key:?} (known: {})", known.join(", "))]
    Unknown { key: String, known: Vec<String> },
    #[error("invalid value {value} for setting {key:?}: {reason}")]
    InvalidValue {
        key: String,
        value: Value,
        reason: String,
    },
}

impl Settings {
    /// These settings with the tool's `setting` known, at its default
    /// unless it is known already.
    pub fn declare<T>(mut self, setting: &ToolSetting<T>) -> Self
    where
        T: Serialize + DeserializeOwned + Default,
    {
        self.tools
            .0
            .entry(setting.key)
            .or_insert_with(|| ToolValue {
                value: serde_json::to_value(T::default()).unwrap_or(Value::Null),
                check: reads_as::<T>,
            });
        self
    }

    /// These settings with the tool's `setting` known and set to `value`.
    pub fn with<T>(self, setting: &ToolSetting<T>, value: T) -> Self
    where
        T: Serialize + DeserializeOwned + Default,
    {
        let mut settings = self.declare(setting);
        if let Some(slot) = settings.tools.0.get_mut(setting.key) {
            slot.value = serde_json::to_value(value).unwrap_or(Value::Null);
        }
        settings
    }

    /// The value of a tool's `setting`; its default where it was never
    /// declared (a context built without the deployment's settings).
    pub fn get<T>(&self, setting: &ToolSetting<T>) -> T
    where
        T: DeserializeOwned + Default,
    {
        self.tools
            .0
            .get(setting.key)
            .and_then(|v| T::deserialize(&v.value).ok())
            .unwrap_or_default()
    }

    /// Every key these settings know, in order.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = SHARED
            .iter()
            .chain(self.tools.0.keys())
            .map(|k| (*k).to_string())
            .collect();
        keys.sort();
        keys
    }

    /// These settings with `changes` (any subset of the keys) applied; the
    /// rest keep their values. Refuses an unknown key, naming the known
    /// ones, and a value of the wrong type, naming its key, before it
    /// changes anything.
    pub fn apply(&self, changes: &Map<String, Value>) -> Result<Settings, SettingsError> {
        for key in changes.keys() {
            if !SHARED.contains(&key.as_str()) && !self.tools.0.contains_key(key.as_str()) {
                return Err(SettingsError::Unknown {
                    key: key.clone(),
                    known: self.keys(),
                });
            }
        }
        let mut next = self.clone();
        for (key, value) in changes {
            let invalid = |e: serde_json::Error| SettingsError::InvalidValue {
                key: key.clone(),
                value: value.clone(),
                reason: e.to_string(),
            };
            match key.as_str() {
                "web_search_enabled" => {
                    next.web_search_enabled = bool::deserialize(value).map_err(invalid)?;
                }
                "fetch_web_page_enabled" => {
                    next.fetch_web_page_enabled = bool::deserialize(value).map_err(invalid)?;
                }
                "tool_rate_limits" => {
                    next.tool_rate_limits = Deserialize::deserialize(value).map_err(invalid)?;
                }
                "approvals" => {
                    next.approvals = Deserialize::deserialize(value).map_err(invalid)?;
                }
                tool_key => {
                    if let Some(slot) = next.tools.0.get_mut(tool_key) {
                        (slot.check)(value).map_err(invalid)?;
                        slot.value = value.clone();
                    }
                }
            }
        }
        Ok(next)
    }
}

impl Serialize for Settings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(SHARED.len() + self.tools.0.len()))?;
        map.serialize_entry("web_search_enabled", &self.web_search_enabled)?;
        map.serialize_entry("fetch_web_page_enabled", &self.fetch_web_page_enabled)?;
        map.serialize_entry("tool_rate_limits", &self.tool_rate_limits)?;
        map.serialize_entry("approvals", &self.approvals)?;
        for (key, slot) in &self.tools.0 {
            map.serialize_entry(key, &slot.value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Colour {
        #[default]
        Red,
        Blue,
    }

    const COLOUR: ToolSetting<Colour> = ToolSetting::new("paint_colour");

    fn changes(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_tool_setting_reads_back_as_its_type_and_defaults_when_undeclared() {
        assert_eq!(Settings::default().get(&COLOUR), Colour::Red);
        let settings = Settings::default().declare(&COLOUR);
        assert_eq!(
            serde_json::to_value(&settings).unwrap(),
            json!({
                "web_search_enabled": false,
                "fetch_web_page_enabled": true,
                "tool_rate_limits": {},
                "approvals": {"tools": [], "categories": [], "annotations": []},
                "paint_colour": "red",
            })
        );
        let blue = settings
            .apply(&changes(
                json!({ "paint_colour": "blue", "web_search_enabled": true }),
            ))
            .unwrap();
        assert_eq!(blue.get(&COLOUR), Colour::Blue);
        assert!(blue.web_search_enabled);
        assert_eq!(
            Settings::default().with(&COLOUR, Colour::Blue),
            blue.clone()
                .apply(&changes(json!({"web_search_enabled": false})))
                .unwrap()
        );
    }

    #[test]
    fn unknown_keys_and_wrong_values_are_refused_by_name() {
        let settings = Settings::default().declare(&COLOUR);
        let e = settings
            .apply(&changes(json!({ "paint_colour": "blue", "brush": 3 })))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown setting \"brush\" (known: approvals, fetch_web_page_enabled, paint_colour, tool_rate_limits, web_search_enabled)"
        );
        let e = settings
            .apply(&changes(json!({ "paint_colour": "green" })))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value \"green\" for setting \"paint_colour\": unknown variant `green`, expected `red` or `blue`"
        );
        let e = settings
            .apply(&changes(json!({ "web_search_enabled": 1 })))
            .unwrap_err();
        assert!(
            matches!(e, SettingsError::InvalidValue { ref key, .. } if key == "web_search_enabled"),
            "{e}"
        );
        // Undeclared, a tool's key is unknown.
        assert!(matches!(
            Settings::default().apply(&changes(json!({ "paint_colour": "red" }))),
            Err(SettingsError::Unknown { .. })
        ));
    }
}
