use crate::{framework::{Thing}, family};

pub fn one() -> Thing {
    Thing
}
