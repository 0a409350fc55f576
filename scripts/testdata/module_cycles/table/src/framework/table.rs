pub static TABLE: &[fn() -> super::Thing] = &[crate::family::one::one];
