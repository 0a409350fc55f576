//! The parsers a script's input meets, fed arbitrary bytes: redis's Lua
//! decoders (`cjson.decode`, `cmsgpack.unpack`, `struct.unpack` with an
//! arbitrary format) run inside a real interpreter under a memory limit,
//! and the text parsers of script bodies (EVAL's `#!lua flags=...`
//! shebang, compiling the body) and of function libraries (FUNCTION
//! LOAD's `#!lua name=...` header, then loading the code with redis's
//! load timeout).
//!
//! The first input byte picks the mode; the rest is the data. The checks:
//! nothing panics or crashes, every failure is an error value (a script
//! error reply, an `Err`), and a decoded value encodes again (cjson's and
//! cmsgpack's round trip runs in the same script).

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use respite_script::{Engine, Host, LogLevel, RunOptions, Script, Value};

/// A host whose `redis.call` is refused: the decoders never call it.
struct NoServer;

impl Host for NoServer {
    fn call(&mut self, _argv: Vec<Vec<u8>>, _resp: u8) -> Result<Vec<u8>, Vec<u8>> {
        Err(b"no server".to_vec())
    }
    fn acl_check(&mut self, _argv: &[Vec<u8>]) -> Option<bool> {
        None
    }
    fn log(&mut self, _level: LogLevel, _message: &[u8]) {}
}

/// The decoders' scripts, by mode: ARGV[1] is the data (ARGV[2] the
/// format for struct).
const DECODERS: [&str; 3] = [
    "local ok, v = pcall(cjson.decode, ARGV[1]) if ok then return cjson.encode(v) end return v",
    "local ok, v = pcall(cmsgpack.unpack, ARGV[1]) if ok then return cmsgpack.pack(v) end return v",
    "return {pcall(struct.unpack, ARGV[2], ARGV[1])}",
];

thread_local! {
    static ENGINE: std::cell::RefCell<Engine> = std::cell::RefCell::new({
        let engine = Engine::new().expect("interpreter");
        engine.set_memory_limit(64 << 20);
        engine
    });
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, data)) = input.split_first() else {
        return;
    };
    match mode % 5 {
        m @ 0..=2 => {
            let script = Script::new(DECODERS[m as usize].as_bytes().to_vec()).expect("script");
            let (data, format) = match data.iter().position(|&b| b == 0) {
                Some(i) if m == 2 => (&data[i + 1..], &data[..i]),
                _ => (data, &b"i"[..]),
            };
            ENGINE.with(|e| {
                let value = e.borrow_mut().run(
                    &script,
                    &[],
                    &[data, format],
                    &mut NoServer,
                    RunOptions::default(),
                );
                if let Value::Error(text) | Value::CalledError(text) = &value {
                    assert!(!text.is_empty());
                }
            });
        }
        3 => {
            // An EVAL body: the shebang, then the code compiled (not run:
            // an arbitrary body may loop).
            if let Ok(script) = Script::new(data.to_vec()) {
                ENGINE.with(|e| {
                    let _ = e.borrow_mut().compile(&script);
                });
            }
        }
        _ => {
            // A FUNCTION LOAD payload: the header, then the code run in a
            // fresh function engine with redis's 500 ms load timeout.
            let Ok(header) = respite_script::library_header(data) else {
                return;
            };
            let _ = respite_script::valid_name(&header.name);
            let mut engine = Engine::new_functions().expect("function engine");
            engine.set_memory_limit(64 << 20);
            let _ = engine.load_library(&data[header.code_start..], Some(Duration::from_millis(500)));
        }
    }
});
