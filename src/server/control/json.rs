//! Reading the control surface's answers into the types: a member's value, `None` when
//! it is not of the type the contract gives it (the answer is then one this library
//! cannot read: `ControlError` 500).

use serde_json::{Map, Value};

pub fn object(v: &Value) -> Option<&Map<String, Value>> {
    v.as_object()
}

/// An object's members: each read as `Some(None)` when absent or `null`, `Some(value)`,
/// or `None` when of another type.
pub struct Read<'v>(pub &'v Map<String, Value>);

impl Read<'_> {
    pub fn text(&self, name: &str) -> Option<Option<String>> {
        match self.0.get(name) {
            None | Some(Value::Null) => Some(None),
            Some(Value::String(s)) => Some(Some(s.clone())),
            Some(_) => None,
        }
    }

    pub fn number(&self, name: &str) -> Option<Option<u64>> {
        match self.0.get(name) {
            None | Some(Value::Null) => Some(None),
            Some(v) => Some(Some(v.as_u64()?)),
        }
    }

    pub fn float(&self, name: &str) -> Option<Option<f64>> {
        match self.0.get(name) {
            None | Some(Value::Null) => Some(None),
            Some(v) => Some(Some(v.as_f64()?)),
        }
    }

    pub fn flag(&self, name: &str) -> Option<bool> {
        self.0.get(name)?.as_bool()
    }
}
