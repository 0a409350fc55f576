//! A cycle that goes through a re-export and a brace group:
//! `family::one` -> `framework` (its `Thing` is `framework::thing`'s) and
//! `framework::thing` -> `family::one` through `super::super`.
pub mod family;
pub mod framework;
