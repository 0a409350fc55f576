//! The command families, one per file: [`strings`], [`bitmaps`],
//! [`hashes`], [`sets`], [`lists`], [`zsets`], [`sort`], [`keys`],
//! [`connection`], [`server`], [`client`], [`introspection`], [`config`],
//! [`info`], [`slowlog`], [`memory`], [`monitor`], [`pubsub`], [`replication`],
//! [`transactions`], [`acl`], [`streams`]; [`common`] holds the helpers more than one of
//! them uses (SCAN's options and reply, random sampling, HELP).
//!
//! Each family exports its own rows of the command table (`commands()`),
//! next to the code they name; the framework that parses, plans and runs
//! them is [`crate::command`], which no family is part of.

pub mod acl;
pub mod bitmaps;
pub mod client;
pub mod common;
pub mod config;
pub mod connection;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod info;
pub mod introspection;
pub mod keys;
pub mod lists;
pub mod memory;
pub mod migrate;
pub mod monitor;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod slowlog;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod transactions;
pub mod zsets;
