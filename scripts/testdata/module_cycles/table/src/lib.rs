//! One cycle, through the table naming the families (an edge the check may
//! allow); otherwise the families
//! use the framework, a test and a comment and a string name the other way.
pub mod family;
pub mod framework;
