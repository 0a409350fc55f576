//! Lua scripting as redis-server 7.0 runs it, with no knowledge of the
//! server it runs in.
//!
//! An [`Engine`] is one Lua 5.1 interpreter set up as redis sets up its EVAL
//! interpreter: the base, table, string and math libraries, redis's `cjson`,
//! `cmsgpack`, `struct` and `bit` (written here in Rust against Lua's C API,
//! to redis's behaviour byte for byte), the `redis` table, and the sandbox:
//! `print`, `dofile`, `loadfile`, `io`, `os`, `package` never exist, `debug`
//! is gone once the error handler has taken it, reading an undeclared
//! global raises "Script attempted to access nonexistent global variable",
//! and the globals and every table reachable from them are readonly. The
//! interpreter itself is Lua 5.1.5 carrying redis's patches (readonly
//! tables, no binary chunks; see `lua-src/README.respite.md`).
//!
//! A script is compiled once per engine under its SHA1 and run with
//! [`Engine::run`]. Whatever the script asks of the server goes through the
//! [`Host`] the caller passes in: `redis.call` hands the command to
//! [`Host::call`] and turns the RESP reply it returns into Lua values as
//! redis does; the script's return value comes back as a [`Value`], already
//! shaped as redis shapes a script's reply (booleans by the script's
//! protocol, tables stopping at the first nil, `{err=}`, `{ok=}`,
//! `{double=}`, `{map=}`, `{set=}`, `{big_number=}`), and errors carry
//! redis's "script: <sha>, on @user_script:<line>." suffix.
//!
//! An engine is not `Send`: each thread that runs scripts owns its own.

mod api;
mod bit;
mod cjson;
mod cmsgpack;
mod convert;
mod library;
mod lstruct;
mod lua;

pub use library::{library_header, split_args, valid_name, Function, LibraryHeader};

use std::collections::HashMap;
use std::ffi::{c_int, c_void};

use mlua::{Lua, LuaOptions, StdLib};

use crate::lua::*;

/// Lowercase hex SHA1, the name a script is known by.
pub fn sha1hex(data: &[u8]) -> String {
    api::sha1hex(data)
}

/// The version the `redis` table reports (`REDIS_VERSION`).
pub const REDIS_VERSION: &str = "7.0.15";
/// `REDIS_VERSION_NUM`: 0x00MMmmpp.
pub const REDIS_VERSION_NUM: u32 = 0x0007_000f;

/// How often (in Lua instructions) a running script checks back with its
/// host, as redis's count hook does.
pub(crate) const HOOK_EVERY: c_int = 100_000;

/// A reply a script produces, protocol-independent: the server encodes it
/// for its client's protocol (a `Map` is a flat array under RESP2, a
/// `Double` a bulk string, `Null` the nil bulk).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `+text`
    Status(Vec<u8>),
    /// `-text` (the text has no leading '-': "ERR ...", "WRONGTYPE ...").
    Error(Vec<u8>),
    /// `-text` as [`Value::Error`], for an error a command called through
    /// `redis.call` or `redis.pcall` answered (or the refusal of such a
    /// call) that the script passes on, as its reply or inside it: redis's
    /// error table marked `ignore_error_stats_update`. The server counted
    /// it in its error statistics when the call failed, and redis does not
    /// count it a second time.
    CalledError(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    /// RESP2's nil bulk, RESP3's null.
    Null,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Double(f64),
    Bool(bool),
    BigNumber(Vec<u8>),
    /// A verbatim string: its three-byte format and its text.
    Verbatim(Vec<u8>, Vec<u8>),
}

/// redis's log levels (`redis.LOG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Verbose,
    Notice,
    Warning,
}

/// What the host says when a running script checks back with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    Continue,
    /// Stop the script with "Script killed by user with SCRIPT KILL...";
    /// `pcall` cannot catch it.
    Kill,
}

/// The server side of a running script.
pub trait Host {
    /// Runs one command for `redis.call`/`redis.pcall`. `Ok` is the
    /// command's reply as RESP bytes in protocol `resp` (2 or 3), an error
    /// reply included; `Err` is a refusal before the command ran, worded as
    /// redis words it ("Unknown Redis command called from script",
    /// "-NOPERM ..."): without a leading '-' it gets the code "ERR".
    fn call(&mut self, argv: Vec<Vec<u8>>, resp: u8) -> Result<Vec<u8>, Vec<u8>>;

    /// `redis.acl_check_cmd`: whether the calling user may run `argv`, or
    /// `None` for an unknown command.
    fn acl_check(&mut self, argv: &[Vec<u8>]) -> Option<bool>;

    /// `redis.log`.
    fn log(&mut self, level: LogLevel, message: &[u8]);

    /// Called every 100,000 Lua instructions while a script runs.
    fn interrupt(&mut self) -> Interrupt {
        Interrupt::Continue
    }
}

/// The most bytes `cjson.encode` and `cmsgpack.pack` build outside the
/// interpreter's own memory (their output buffers): the last memory limit
/// an engine was given. A table that holds one long string many times
/// would otherwise make an output far larger than the interpreter holds.
static OUTPUT_LIMIT: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(usize::MAX);

/// Whether an encoder's output of `len` bytes is past [`OUTPUT_LIMIT`]:
/// it then fails with Lua's own "not enough memory".
pub(crate) fn output_too_long(len: usize) -> bool {
    len > OUTPUT_LIMIT.load(std::sync::atomic::Ordering::Relaxed)
}

/// `redis.log` while no script runs (a function library being loaded) has
/// no host to write to; redis writes to its log, respite drops it.
pub(crate) fn log_outside_run(_level: LogLevel, _message: &[u8]) {}

/// Script flags (`#!lua flags=...`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    /// No shebang: redis's compatibility mode (the script may write, and
    /// its flags are those of EVAL).
    pub compat: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot_keys: bool,
}

/// A script body with its SHA1 and its shebang flags, ready to compile.
#[derive(Debug, Clone)]
pub struct Script {
    /// Lowercase hex SHA1 of the whole body.
    pub sha: String,
    pub body: std::sync::Arc<[u8]>,
    pub flags: Flags,
    /// Length of the shebang line (kept out of the compiled code; its
    /// newline stays so line numbers match).
    shebang_len: usize,
}

impl Script {
    /// Reads the body's shebang (`evalExtractShebangFlags`); the error is
    /// redis's text, without "ERR ".
    pub fn new(body: impl Into<std::sync::Arc<[u8]>>) -> Result<Script, String> {
        let body = body.into();
        let (flags, shebang_len) = shebang_flags(&body)?;
        Ok(Script {
            sha: api::sha1hex(&body),
            body,
            flags,
            shebang_len,
        })
    }
}

/// Parses a `#!lua flags=a,b` first line.
pub fn shebang_flags(body: &[u8]) -> Result<(Flags, usize), String> {
    let mut flags = Flags {
        compat: true,
        ..Flags::default()
    };
    if !body.starts_with(b"#!") {
        return Ok((flags, 0));
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let parts: Vec<&str> = line.split_ascii_whitespace().collect();
    if parts.is_empty() {
        return Err("Invalid engine in script shebang".into());
    }
    if parts[0] != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {}", parts[0]));
    }
    flags.compat = false;
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {part}"));
        };
        if list.is_empty() {
            continue;
        }
        for flag in list.split(',') {
            match flag {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
                _ => return Err(format!("Unexpected flag in script shebang: {flag}")),
            }
        }
    }
    Ok((flags, end))
}

/// Why the interpreter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("Lua interpreter setup failed: {0}")]
    Lua(String),
}

/// One Lua interpreter with redis's environment and a cache of compiled
/// scripts.
pub struct Engine {
    lua: Lua,
    state: State,
    /// sha -> registry reference of the compiled chunk.
    compiled: HashMap<String, c_int>,
    /// The function engine's functions: name -> registry reference of
    /// the callback.
    functions: HashMap<String, c_int>,
    kind: Kind,
    handler_ref: c_int,
    rand: Box<api::Rand48>,
    runs: u64,
}

/// The error handler redis installs (`__redis__err__handler`), verbatim: it
/// takes `debug` out of the globals and turns any error into a table with
/// the script's source and line.
const ERROR_HANDLER: &str = "local dbg = debug\n\
debug = nil\n\
function __redis__err__handler(err)\n  \
local i = dbg.getinfo(2,'nSl')\n  \
if i and i.what == 'C' then\n    \
i = dbg.getinfo(3,'nSl')\n  \
end\n  \
if type(err) ~= 'table' then\n    \
err = {err='ERR ' .. tostring(err)}  \
end  \
if i then\n    \
err['source'] = i.source\n    \
err['line'] = i.currentline\n  \
end  \
return err\n\
end\n";

/// Globals a library may add while the interpreter is set up; anything
/// else is dropped (redis logs it). `getfenv`, `setfenv` and `newproxy` are
/// not among them: the redis-server 7.0.15 of current distributions (with
/// the 2025 Lua security fixes) no longer offers them.
const ALLOWED_GLOBALS: &[&[u8]] = &[
    b"string",
    b"cjson",
    b"bit",
    b"cmsgpack",
    b"math",
    b"table",
    b"struct",
    b"redis",
    b"__redis__err__handler",
    b"xpcall",
    b"tostring",
    b"setmetatable",
    b"next",
    b"assert",
    b"tonumber",
    b"rawequal",
    b"collectgarbage",
    b"getmetatable",
    b"rawset",
    b"pcall",
    b"coroutine",
    b"type",
    b"_G",
    b"select",
    b"unpack",
    b"gcinfo",
    b"pairs",
    b"rawget",
    b"loadstring",
    b"ipairs",
    b"_VERSION",
    b"load",
    b"error",
    b"debug",
];

unsafe extern "C-unwind" fn newindex_allow_list(l: State) -> c_int {
    if lua_gettop(l) != 3 {
        raise(l, "Wrong number of arguments to luaNewIndexAllowList");
    }
    if lua_istable(l, -3) == 0 {
        raise(l, "first argument to luaNewIndexAllowList must be a table");
    }
    if lua_isstring(l, -2) == 0 {
        raise(
            l,
            "Second argument to luaNewIndexAllowList must be a string or number",
        );
    }
    let name = to_cstr_bytes(l, -2).unwrap_or_default();
    if ALLOWED_GLOBALS.contains(&name) {
        lua_rawset(l, -3);
    }
    0
}

unsafe extern "C-unwind" fn protected_table_error(l: State) -> c_int {
    if lua_gettop(l) != 2 {
        raise(l, "Wrong number of arguments to luaProtectedTableError");
    }
    if lua_isstring(l, -1) == 0 {
        raise(
            l,
            "Second argument to luaProtectedTableError must be a string or number",
        );
    }
    let name = to_cstr_bytes(l, -1).unwrap_or_default();
    let mut msg = b"Script attempted to access nonexistent global variable '".to_vec();
    msg.extend_from_slice(name);
    msg.push(b'\'');
    raise(l, msg)
}

/// `luaSetErrorMetatable`: gives the table at the top a metatable whose
/// `__index` raises "Script attempted to access nonexistent global
/// variable".
pub(crate) unsafe fn set_error_metatable(l: State) {
    lua_newtable(l);
    lua_pushcfunction(l, protected_table_error);
    lua_setfield(l, -2, c"__index".as_ptr());
    lua_setmetatable(l, -2);
}

/// `luaSetTableProtectionRecursively` on the table at the top.
pub(crate) unsafe fn protect_recursively(l: State) {
    if lua_isreadonlytable(l, -1) != 0 {
        return;
    }
    lua_enablereadonlytable(l, -1, 1);
    lua_checkstack(l, 2);
    lua_pushnil(l);
    while lua_next(l, -2) != 0 {
        if lua_istable(l, -1) != 0 {
            protect_recursively(l);
        }
        lua_pop(l, 1);
    }
    if lua_getmetatable(l, -1) != 0 {
        protect_recursively(l);
        lua_pop(l, 1);
    }
}

unsafe fn open_lib(l: State, name: &std::ffi::CStr, open: lua_CFunction) {
    lua_pushcfunction(l, open);
    lua_pushstring(l, name.as_ptr());
    lua_call(l, 1, 0);
}

/// Wraps an `open` that leaves its table on the stack into one that also
/// sets the global, as `luaL_register` does for the C libraries.
macro_rules! global_lib {
    ($name:ident, $open:path, $global:literal) => {
        unsafe extern "C-unwind" fn $name(l: State) -> c_int {
            $open(l);
            lua_pushvalue(l, -1);
            lua_setfield(l, LUA_GLOBALSINDEX, $global.as_ptr());
            1
        }
    };
}
global_lib!(open_cjson, cjson::open, c"cjson");
global_lib!(open_struct, lstruct::open, c"struct");
global_lib!(open_cmsgpack, cmsgpack::open, c"cmsgpack");
global_lib!(open_bit, bit::open, c"bit");

/// Which of redis's two interpreters an [`Engine`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// EVAL's (`scriptingInit`).
    Eval,
    /// The function engine's (`luaEngineInitEngine`).
    Functions,
}

/// The whole of `scriptingInit` (or `luaEngineInitEngine`), run
/// protected; the argument points at the [`Kind`].
unsafe extern "C-unwind" fn setup(l: State) -> c_int {
    let kind = *(lua_touserdata(l, 1) as *const Kind);
    // Start from empty globals (the Lua state may come with the base
    // library already open).
    loop {
        lua_pushnil(l);
        if lua_next(l, LUA_GLOBALSINDEX) == 0 {
            break;
        }
        lua_pop(l, 1);
        lua_pushnil(l);
        lua_rawset(l, LUA_GLOBALSINDEX);
    }
    // And with no library recorded as loaded, so each one registers anew.
    lua_newtable(l);
    lua_setfield(l, LUA_REGISTRYINDEX, c"_LOADED".as_ptr());

    // Only allow-listed globals may be created while libraries load.
    lua_pushvalue(l, LUA_GLOBALSINDEX);
    lua_newtable(l);
    lua_pushcfunction(l, newindex_allow_list);
    lua_setfield(l, -2, c"__newindex".as_ptr());
    lua_setmetatable(l, -2);
    lua_pop(l, 1);

    open_lib(l, c"", luaopen_base);
    open_lib(l, c"table", luaopen_table);
    open_lib(l, c"string", luaopen_string);
    open_lib(l, c"math", luaopen_math);
    open_lib(l, c"debug", luaopen_debug);
    open_lib(l, c"cjson", open_cjson);
    open_lib(l, c"struct", open_struct);
    open_lib(l, c"cmsgpack", open_cmsgpack);
    open_lib(l, c"bit", open_bit);

    api::register(l);
    if kind == Kind::Eval {
        api::register_eval_extras(l);
        if luaL_loadbuffer(
            l,
            ERROR_HANDLER.as_ptr() as *const _,
            ERROR_HANDLER.len(),
            c"@err_handler_def".as_ptr(),
        ) != 0
        {
            lua_error(l);
        }
        lua_call(l, 0, 0);
    } else {
        library::library_api(l);
    }

    // Lock the globals: unknown names raise, and nothing reachable from
    // them can be modified.
    lua_pushvalue(l, LUA_GLOBALSINDEX);
    set_error_metatable(l);
    protect_recursively(l);
    lua_pop(l, 1);
    // The strings' metatable (its __index is the string table) too.
    lua_pushstring(l, c"".as_ptr());
    if lua_getmetatable(l, -1) != 0 {
        protect_recursively(l);
        lua_pop(l, 1);
    }
    lua_pop(l, 1);
    if kind == Kind::Functions {
        library::finish_setup(l);
    }
    0
}

/// Arguments of one protected run (`lua_cpcall` passes a pointer).
struct RunArgs<'a> {
    engine_handler: c_int,
    func: c_int,
    keys: &'a [&'a [u8]],
    args: &'a [&'a [u8]],
    sha: &'a str,
    run: *mut api::Run,
    hook: bool,
    gc_step: bool,
    out: Option<Value>,
}

pub(crate) unsafe extern "C-unwind" fn count_hook(l: State, _ar: *mut lua_Debug) {
    let Some(run) = api::get_run(l) else {
        return;
    };
    if !run.killed && (*run.host).interrupt() == Interrupt::Kill {
        run.killed = true;
    }
    if run.killed {
        // From here on every line raises again, so pcall cannot hold on.
        lua_sethook(l, Some(count_hook), LUA_MASKLINE, 0);
        convert::push_error(l, b"Script killed by user with SCRIPT KILL...");
        lua_error(l);
    }
}

pub(crate) unsafe fn push_array(l: State, items: &[&[u8]]) {
    lua_createtable(l, items.len() as c_int, 0);
    for (j, item) in items.iter().enumerate() {
        push_bytes(l, item);
        lua_rawseti(l, -2, (j + 1) as _);
    }
}

unsafe extern "C-unwind" fn run_protected(l: State) -> c_int {
    let a = &mut *(lua_touserdata(l, 1) as *mut RunArgs);
    lua_settop(l, 0);
    lua_rawgeti(l, LUA_REGISTRYINDEX, a.engine_handler as _);
    lua_rawgeti(l, LUA_REGISTRYINDEX, a.func as _);
    api::set_run(l, a.run);
    if a.hook {
        lua_sethook(l, Some(count_hook), LUA_MASKCOUNT, HOOK_EVERY);
    }
    push_array(l, a.keys);
    lua_enablereadonlytable(l, LUA_GLOBALSINDEX, 0);
    lua_setfield(l, LUA_GLOBALSINDEX, c"KEYS".as_ptr());
    lua_enablereadonlytable(l, LUA_GLOBALSINDEX, 1);
    push_array(l, a.args);
    lua_enablereadonlytable(l, LUA_GLOBALSINDEX, 0);
    lua_setfield(l, LUA_GLOBALSINDEX, c"ARGV".as_ptr());
    lua_enablereadonlytable(l, LUA_GLOBALSINDEX, 1);

    let err = lua_pcall(l, 0, 1, -2);
    if a.gc_step {
        lua_gc(l, LUA_GCSTEP, 50);
    }
    a.out = Some(finish_run(l, err, a.sha, (*a.run).resp));
    lua_sethook(l, None, 0, 0);
    api::set_run(l, std::ptr::null_mut());
    0
}

/// The reply of a run that ended with `lua_pcall`'s `err`: the value it
/// returned, or the error at the top of the stack with redis's "script:
/// <name>, on <source>:<line>." suffix.
pub(crate) unsafe fn finish_run(l: State, err: c_int, name: &str, resp: u8) -> Value {
    if err != 0 {
        if lua_istable(l, -1) == 0 {
            let msg = to_cstr_bytes(l, -1).unwrap_or(b"execution failure");
            let msg = &msg[..msg.len().min(100)];
            let mut text = format!("ERR Error running script {}, ", name).into_bytes();
            text.extend_from_slice(msg);
            Value::Error(trim_newlines(text))
        } else {
            let info = convert::error_info(l);
            // redis-server 7.0 dereferences a missing message (and dies on
            // `error({})`); respite names it instead.
            let mut text = info.msg.unwrap_or_else(|| b"ERR unknown error".to_vec());
            if let (Some(line), Some(source)) = (info.line, info.source) {
                text.extend_from_slice(format!(" script: {}, on ", name).as_bytes());
                text.extend_from_slice(&source);
                text.push(b':');
                text.extend_from_slice(&line);
                text.push(b'.');
            }
            if info.counted {
                Value::CalledError(text)
            } else {
                Value::Error(text)
            }
        }
    } else {
        convert::to_value(l, resp)
    }
}

/// redis trims trailing newlines from an error and turns the others into
/// spaces.
fn trim_newlines(mut s: Vec<u8>) -> Vec<u8> {
    while matches!(s.last(), Some(b'\r' | b'\n')) {
        s.pop();
    }
    for c in s.iter_mut() {
        if *c == b'\r' || *c == b'\n' {
            *c = b' ';
        }
    }
    s
}

/// How a script is run.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Check back with [`Host::interrupt`] every 100,000 instructions
    /// (redis does when `busy-reply-threshold` is above 0).
    pub check_interrupts: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            check_interrupts: true,
        }
    }
}

impl Engine {
    /// A fresh interpreter with redis's EVAL environment.
    pub fn new() -> Result<Engine, SetupError> {
        Engine::with_kind(Kind::Eval)
    }

    /// A fresh function engine: the interpreter `FUNCTION LOAD` loads
    /// libraries into and `FCALL` calls them in (see [`library`]).
    pub fn new_functions() -> Result<Engine, SetupError> {
        Engine::with_kind(Kind::Functions)
    }

    fn with_kind(mut kind: Kind) -> Result<Engine, SetupError> {
        // SAFETY: the debug library is loaded only for the error handler,
        // which takes it out of the globals before any script runs.
        let lua = unsafe {
            Lua::unsafe_new_with(StdLib::NONE, LuaOptions::new().catch_rust_panics(false))
        };
        let state = lua.exec_raw_lua(|raw| raw.state());
        let handler_ref = unsafe {
            if lua_cpcall(state, setup, &mut kind as *mut Kind as *mut c_void) != 0 {
                let msg = to_bytes(state, -1)
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                lua_pop(state, 1);
                return Err(SetupError::Lua(msg));
            }
            match kind {
                Kind::Eval => {
                    lua_getfield(state, LUA_GLOBALSINDEX, c"__redis__err__handler".as_ptr())
                }
                Kind::Functions => lua_getfield(
                    state,
                    LUA_REGISTRYINDEX,
                    library::ERROR_HANDLER_KEY.as_ptr(),
                ),
            };
            luaL_ref(state, LUA_REGISTRYINDEX)
        };
        Ok(Engine {
            lua,
            state,
            compiled: HashMap::new(),
            functions: HashMap::new(),
            kind,
            handler_ref,
            rand: Box::new(api::Rand48::new()),
            runs: 0,
        })
    }

    /// Bytes the interpreter holds (`used_memory_lua`).
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Caps the interpreter's memory; past it an allocation fails and the
    /// script gets "not enough memory". 0 lifts the cap.
    pub fn set_memory_limit(&self, bytes: usize) {
        let _ = self.lua.set_memory_limit(bytes);
        OUTPUT_LIMIT.store(
            if bytes == 0 { usize::MAX } else { bytes },
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Runs a full garbage collection (what a script left behind, which
    /// Lua 5.1 would otherwise keep until its next cycle).
    pub fn collect_garbage(&self) {
        let _ = self.lua.gc_collect();
    }

    /// Whether `sha` is compiled in this interpreter.
    pub fn is_compiled(&self, sha: &str) -> bool {
        self.compiled.contains_key(sha)
    }

    /// Compiles `script` (once); the error is the client's reply text
    /// ("ERR Error compiling script (new function): user_script:1: ...").
    pub fn compile(&mut self, script: &Script) -> Result<(), String> {
        if self.compiled.contains_key(&script.sha) {
            return Ok(());
        }
        let code = &script.body[script.shebang_len..];
        let l = self.state;
        unsafe {
            struct Load<'a> {
                code: &'a [u8],
                status: c_int,
            }
            unsafe extern "C-unwind" fn load(l: State) -> c_int {
                let a = &mut *(lua_touserdata(l, 1) as *mut Load);
                lua_settop(l, 0);
                a.status = luaL_loadbuffer(
                    l,
                    a.code.as_ptr() as *const _,
                    a.code.len(),
                    c"@user_script".as_ptr(),
                );
                // Leaves the chunk or the message; the caller takes it.
                lua_pushvalue(l, -1);
                lua_setfield(l, LUA_REGISTRYINDEX, c"respite.loaded".as_ptr());
                0
            }
            let mut a = Load { code, status: 0 };
            let rc = lua_cpcall(l, load, &mut a as *mut Load as *mut c_void);
            if rc != 0 {
                let msg = to_bytes(l, -1).unwrap_or_default().to_vec();
                lua_pop(l, 1);
                return Err(format!(
                    "ERR Error compiling script (new function): {}",
                    String::from_utf8_lossy(&msg)
                ));
            }
            lua_getfield(l, LUA_REGISTRYINDEX, c"respite.loaded".as_ptr());
            lua_pushnil(l);
            lua_setfield(l, LUA_REGISTRYINDEX, c"respite.loaded".as_ptr());
            if a.status != 0 {
                let msg = to_bytes(l, -1).unwrap_or_default().to_vec();
                lua_pop(l, 1);
                return Err(format!(
                    "ERR Error compiling script (new function): {}",
                    String::from_utf8_lossy(&msg)
                ));
            }
            let r = luaL_ref(l, LUA_REGISTRYINDEX);
            self.compiled.insert(script.sha.clone(), r);
        }
        Ok(())
    }

    /// Runs `script` with `keys` and `args` as KEYS and ARGV, compiling it
    /// first if needed; returns the reply for the caller.
    pub fn run(
        &mut self,
        script: &Script,
        keys: &[&[u8]],
        args: &[&[u8]],
        host: &mut dyn Host,
        options: RunOptions,
    ) -> Value {
        if let Err(e) = self.compile(script) {
            return Value::Error(e.into_bytes());
        }
        let func = self.compiled[&script.sha];
        // SAFETY: the host outlives the run; the pointer is cleared from
        // the registry before this function returns.
        let host: *mut (dyn Host + '_) = host;
        let host: *mut (dyn Host + 'static) = unsafe { std::mem::transmute(host) };
        let mut run = api::Run {
            host,
            resp: 2,
            repl: 3,
            rand: &mut *self.rand,
            killed: false,
        };
        self.runs += 1;
        let mut a = RunArgs {
            engine_handler: self.handler_ref,
            func,
            keys,
            args,
            sha: &script.sha,
            run: &mut run,
            hook: options.check_interrupts,
            gc_step: self.runs.is_multiple_of(50),
            out: None,
        };
        let l = self.state;
        unsafe {
            let rc = lua_cpcall(l, run_protected, &mut a as *mut RunArgs as *mut c_void);
            if rc != 0 {
                let msg = to_bytes(l, -1).unwrap_or(b"execution failure").to_vec();
                lua_settop(l, 0);
                lua_sethook(l, None, 0, 0);
                api::set_run(l, std::ptr::null_mut());
                let mut text = format!("ERR Error running script {}, ", script.sha).into_bytes();
                text.extend_from_slice(&msg[..msg.len().min(100)]);
                return Value::Error(trim_newlines(text));
            }
            lua_settop(l, 0);
        }
        a.out.unwrap_or(Value::Null)
    }

    /// Loads a library's code (after its header; see [`library_header`])
    /// into this function engine, as `FUNCTION LOAD` does: runs it so that
    /// it registers its functions, stopping it past `timeout`. Answers the
    /// functions it registered (in the order it registered them), which
    /// from then on can be called by name; the error is redis's text
    /// without "ERR " ("Error compiling function: ...", "Error registering
    /// functions: ..."). A library that registers nothing is not an error
    /// here (`FUNCTION LOAD` makes it one). The names must not be in use
    /// in this engine: load into a fresh engine to check a library.
    pub fn load_library(
        &mut self,
        code: &[u8],
        timeout: Option<std::time::Duration>,
    ) -> Result<Vec<Function>, String> {
        if self.kind != Kind::Functions {
            return Err("not a function engine".into());
        }
        let mut ctx = library::LoadCtx {
            functions: Vec::new(),
            start: std::time::Instant::now(),
            timeout,
        };
        let mut a = library::LoadArgs {
            code,
            ctx: &mut ctx,
            error: None,
        };
        let l = self.state;
        let rc = unsafe {
            lua_cpcall(
                l,
                library::load_protected,
                &mut a as *mut library::LoadArgs as *mut c_void,
            )
        };
        let error = if rc != 0 {
            let msg = unsafe { to_bytes(l, -1).unwrap_or_default().to_vec() };
            unsafe { lua_settop(l, 0) };
            Some(msg)
        } else {
            a.error
        };
        if let Some(e) = error {
            for (_, r) in ctx.functions {
                unsafe { library::unref(l, r) };
            }
            return Err(String::from_utf8_lossy(&e).into_owned());
        }
        let mut out = Vec::with_capacity(ctx.functions.len());
        for (f, r) in ctx.functions {
            if let Some(old) = self.functions.insert(f.name.clone(), r) {
                unsafe { library::unref(l, old) };
            }
            out.push(f);
        }
        Ok(out)
    }

    /// Whether this function engine has a function `name`.
    pub fn has_function(&self, name: &str) -> bool {
        self.functions.contains_key(name)
    }

    /// Calls the function `name` with `keys` and `args` (its two
    /// arguments), as `FCALL` does; errors carry "script: <name>, on
    /// @user_function:<line>.".
    pub fn call_function(
        &mut self,
        name: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
        host: &mut dyn Host,
        options: RunOptions,
    ) -> Value {
        let Some(&func) = self.functions.get(name) else {
            return Value::Error(b"ERR Function not found".to_vec());
        };
        // SAFETY: as in `run`.
        let host: *mut (dyn Host + '_) = host;
        let host: *mut (dyn Host + 'static) = unsafe { std::mem::transmute(host) };
        let mut run = api::Run {
            host,
            resp: 2,
            repl: 3,
            rand: &mut *self.rand,
            killed: false,
        };
        self.runs += 1;
        let mut a = library::CallArgs {
            func,
            keys,
            args,
            name,
            run: &mut run,
            hook: options.check_interrupts,
            gc_step: self.runs.is_multiple_of(50),
            out: None,
        };
        let l = self.state;
        unsafe {
            let rc = lua_cpcall(
                l,
                library::call_protected,
                &mut a as *mut library::CallArgs as *mut c_void,
            );
            if rc != 0 {
                let msg = to_bytes(l, -1).unwrap_or(b"execution failure").to_vec();
                lua_settop(l, 0);
                lua_sethook(l, None, 0, 0);
                api::set_run(l, std::ptr::null_mut());
                let mut text = format!("ERR Error running script {name}, ").into_bytes();
                text.extend_from_slice(&msg[..msg.len().min(100)]);
                return Value::Error(trim_newlines(text));
            }
            lua_settop(l, 0);
        }
        a.out.unwrap_or(Value::Null)
    }
}
