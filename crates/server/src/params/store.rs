//! The values of the stored parameters: those the table does not mark live,
//! kept as CONFIG GET shows them, starting at their defaults.

use std::collections::HashMap;
use std::sync::RwLock;

use super::table::{Source, PARAMS};

/// The values of the stored parameters.
pub struct Params {
    values: RwLock<HashMap<&'static str, String>>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            values: RwLock::new(
                PARAMS
                    .iter()
                    .filter(|p| matches!(p.source, Source::Stored))
                    .map(|p| (p.name, p.default.to_string()))
                    .collect(),
            ),
        }
    }
}

impl Params {
    /// A stored parameter's value ("" for an unknown name).
    pub fn get(&self, name: &str) -> String {
        self.values
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    pub(super) fn set(&self, name: &'static str, value: String) {
        self.values
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, value);
    }
}
