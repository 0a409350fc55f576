use crate::framework::Thing;

/// Made by [`crate::framework::table`].
pub fn one() -> Thing {
    Thing
}

/// How many rows the table has: a cycle, but through the table's own
/// edge to the families, which the check may allow.
pub fn rows() -> usize {
    crate::framework::TABLE.len()
}
