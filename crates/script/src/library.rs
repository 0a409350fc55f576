//! Function libraries as redis 7.0's Lua function engine runs them
//! (`function_lua.c`): what `FUNCTION LOAD` compiles and what `FCALL`
//! calls.
//!
//! The function engine is a Lua state of its own, set up as EVAL's is
//! (the same libraries, the same `redis` table without the debugger's
//! `breakpoint`/`debug`/`replicate_commands`, the same protected globals),
//! with one more layer: the globals a chunk sees are an empty, readonly
//! table whose metatable's `__index` points at the real globals. While a
//! library's code runs (the body of `FUNCTION LOAD`) that `__index` points
//! instead at a small table holding only `redis.register_function`,
//! `redis.log`, the `LOG_*` levels and the version: loading code can
//! register functions and nothing else (`string`, `redis.call` and the rest
//! are "nonexistent global variables" there, as in redis). Each registered
//! callback is kept in the registry; `FCALL` calls it with the KEYS and
//! ARGV tables as its two arguments (they are not globals here).
//!
//! A library's load may take at most the given time (redis gives
//! `FUNCTION LOAD` 500 ms, and loading a stored library no limit); past it
//! the load fails with "FUNCTION LOAD timeout".

use std::ffi::c_int;
use std::time::{Duration, Instant};

use crate::lua::*;
use crate::{convert, Flags};

/// The registry key (its address) of the library being loaded.
static LOAD_KEY: u8 = 0;

/// One function a library registered.
#[derive(Debug, Clone)]
pub struct Function {
    /// Its name (letters, digits and underscores).
    pub name: String,
    /// `description`, when the named form gave one.
    pub description: Option<Vec<u8>>,
    /// Its flags (`no-writes`, ...); `compat` is never set.
    pub flags: Flags,
}

/// What a library's code registered while it ran.
pub(crate) struct LoadCtx {
    pub functions: Vec<(Function, c_int)>,
    pub start: Instant,
    pub timeout: Option<Duration>,
}

/// The header of a library's code: `#!<engine> name=<library>` on its
/// first line (`functionExtractLibMetaData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryHeader {
    /// The engine named after `#!` (redis knows only `LUA`, matched
    /// without regard to case).
    pub engine: Vec<u8>,
    /// The library's name.
    pub name: Vec<u8>,
    /// Where the code after the header starts: the newline ending the
    /// header, kept so that line numbers count the header.
    pub code_start: usize,
}

/// Reads a library's header; the error is redis's text (without "ERR ").
pub fn library_header(code: &[u8]) -> Result<LibraryHeader, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    // redis looks for the newline with strchr: a NUL before it ends the
    // search.
    let end = code
        .iter()
        .position(|&c| c == b'\n' || c == 0)
        .filter(|&i| code[i] == b'\n');
    let Some(end) = end else {
        return Err("Invalid library metadata".into());
    };
    let Some(parts) = split_args(&code[..end]) else {
        return Err("Invalid library metadata".into());
    };
    if parts.is_empty() {
        return Err("Invalid library metadata".into());
    }
    let engine = parts[0].get(2..).unwrap_or_default().to_vec();
    let mut name: Option<Vec<u8>> = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(cstr(part))
        ));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    Ok(LibraryHeader {
        engine,
        name,
        code_start: end,
    })
}

/// The bytes up to the first NUL, as C's `%s` prints them.
fn cstr(s: &[u8]) -> &[u8] {
    &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
}

/// Whether `name` is a valid library or function name: at least one
/// character, all of them letters, digits or underscores.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// redis's `sdssplitargs`: words separated by spaces, with `"..."` (and
/// its escapes) and `'...'` quoting; `None` for unbalanced quotes or a
/// closing quote not followed by a space.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut p = 0;
    let is_space = |c: u8| matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c);
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(out);
        }
        let mut current = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                if p >= line.len() {
                    return None;
                }
                if line[p] == b'\\'
                    && p + 3 < line.len()
                    && line[p + 1] == b'x'
                    && line[p + 2].is_ascii_hexdigit()
                    && line[p + 3].is_ascii_hexdigit()
                {
                    let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    current.push(hex(line[p + 2]) * 16 + hex(line[p + 3]));
                    p += 3;
                } else if line[p] == b'\\' && p + 1 < line.len() {
                    p += 1;
                    current.push(match line[p] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        c => c,
                    });
                } else if line[p] == b'"' {
                    if p + 1 < line.len() && !is_space(line[p + 1]) {
                        return None;
                    }
                    p += 1;
                    break;
                } else {
                    current.push(line[p]);
                }
            } else if insq {
                if p >= line.len() {
                    return None;
                }
                if line[p] == b'\\' && p + 1 < line.len() && line[p + 1] == b'\'' {
                    p += 1;
                    current.push(b'\'');
                } else if line[p] == b'\'' {
                    if p + 1 < line.len() && !is_space(line[p + 1]) {
                        return None;
                    }
                    p += 1;
                    break;
                } else {
                    current.push(line[p]);
                }
            } else {
                if p >= line.len() {
                    break;
                }
                match line[p] {
                    c if is_space(c) => break,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => current.push(c),
                }
            }
            p += 1;
        }
        out.push(current);
    }
}

pub(crate) unsafe fn set_load(l: State, ctx: *mut LoadCtx) {
    lua_pushlightuserdata(l, &LOAD_KEY as *const u8 as *mut _);
    if ctx.is_null() {
        lua_pushnil(l);
    } else {
        lua_pushlightuserdata(l, ctx as *mut _);
    }
    lua_rawset(l, LUA_REGISTRYINDEX);
}

unsafe fn get_load<'a>(l: State) -> Option<&'a mut LoadCtx> {
    lua_pushlightuserdata(l, &LOAD_KEY as *const u8 as *mut _);
    lua_rawget(l, LUA_REGISTRYINDEX);
    let p = lua_touserdata(l, -1) as *mut LoadCtx;
    lua_pop(l, 1);
    p.as_mut()
}

/// `luaEngineLoadHook`: stops a load that runs past its time.
pub(crate) unsafe extern "C-unwind" fn load_hook(l: State, _ar: *mut lua_Debug) {
    let Some(ctx) = get_load(l) else {
        return;
    };
    if ctx.timeout.is_some_and(|t| ctx.start.elapsed() > t) {
        lua_sethook(l, Some(load_hook), LUA_MASKLINE, 0);
        convert::push_error(l, b"FUNCTION LOAD timeout");
        lua_error(l);
    }
}

/// The string at `idx` (a string or a number), as `luaGetStringSds`.
unsafe fn string_at(l: State, idx: c_int) -> Option<Vec<u8>> {
    if lua_isstring(l, idx) == 0 {
        return None;
    }
    to_bytes(l, idx).map(|b| b.to_vec())
}

/// Reads the flags table at the top of the stack; `None` on an unknown
/// flag.
unsafe fn read_flags(l: State) -> Option<Flags> {
    let mut flags = Flags::default();
    let mut j = 1;
    loop {
        lua_pushnumber(l, j as f64);
        j += 1;
        lua_gettable(l, -2);
        if lua_type(l, -1) == LUA_TNIL {
            lua_pop(l, 1);
            return Some(flags);
        }
        if lua_isstring(l, -1) == 0 {
            lua_pop(l, 1);
            return None;
        }
        let flag = to_cstr_bytes(l, -1)
            .unwrap_or_default()
            .to_ascii_lowercase();
        lua_pop(l, 1);
        match flag.as_slice() {
            b"no-writes" => flags.no_writes = true,
            b"allow-oom" => flags.allow_oom = true,
            b"allow-stale" => flags.allow_stale = true,
            b"no-cluster" => flags.no_cluster = true,
            b"allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
            _ => return None,
        }
    }
}

/// The arguments of one `register_function` call.
struct Args {
    name: Vec<u8>,
    description: Option<Vec<u8>>,
    func_ref: c_int,
    flags: Flags,
}

unsafe fn named_args(l: State) -> Result<Args, &'static str> {
    if lua_istable(l, 1) == 0 {
        return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
    }
    let mut name = None;
    let mut description = None;
    let mut func_ref = None;
    let mut flags = Flags::default();
    let fail = |l: State, func_ref: Option<c_int>, msg: &'static str| {
        if let Some(r) = func_ref {
            luaL_unref(l, LUA_REGISTRYINDEX, r);
        }
        Err(msg)
    };
    lua_pushnil(l);
    while lua_next(l, -2) != 0 {
        if lua_isstring(l, -2) == 0 {
            return fail(
                l,
                func_ref,
                "named argument key given to redis.register_function is not a string",
            );
        }
        // A number key is converted in place by lua_tostring, as in redis.
        let key = to_cstr_bytes(l, -2)
            .unwrap_or_default()
            .to_ascii_lowercase();
        match key.as_slice() {
            b"function_name" => {
                match string_at(l, -1) {
                    Some(s) => name = Some(s),
                    None => return fail(
                        l,
                        func_ref,
                        "function_name argument given to redis.register_function must be a string",
                    ),
                }
            }
            b"description" => {
                match string_at(l, -1) {
                    Some(s) => description = Some(s),
                    None => return fail(
                        l,
                        func_ref,
                        "description argument given to redis.register_function must be a string",
                    ),
                }
            }
            b"callback" => {
                if lua_type(l, -1) != LUA_TFUNCTION {
                    return fail(
                        l,
                        func_ref,
                        "callback argument given to redis.register_function must be a function",
                    );
                }
                if let Some(old) = func_ref {
                    luaL_unref(l, LUA_REGISTRYINDEX, old);
                }
                func_ref = Some(luaL_ref(l, LUA_REGISTRYINDEX));
                continue;
            }
            b"flags" => {
                if lua_istable(l, -1) == 0 {
                    return fail(l, func_ref, "flags argument to redis.register_function must be a table representing function flags");
                }
                match read_flags(l) {
                    Some(f) => flags = f,
                    None => return fail(l, func_ref, "unknown flag given"),
                }
            }
            _ => {
                return fail(
                    l,
                    func_ref,
                    "unknown argument given to redis.register_function",
                )
            }
        }
        lua_pop(l, 1);
    }
    let Some(name) = name else {
        return fail(
            l,
            func_ref,
            "redis.register_function must get a function name argument",
        );
    };
    let Some(func_ref) = func_ref else {
        return Err("redis.register_function must get a callback argument");
    };
    Ok(Args {
        name,
        description,
        func_ref,
        flags,
    })
}

unsafe fn positional_args(l: State) -> Result<Args, &'static str> {
    let Some(name) = string_at(l, 1) else {
        return Err("first argument to redis.register_function must be a string");
    };
    if lua_type(l, 2) != LUA_TFUNCTION {
        return Err("second argument to redis.register_function must be a function");
    }
    let func_ref = luaL_ref(l, LUA_REGISTRYINDEX);
    Ok(Args {
        name,
        description: None,
        func_ref,
        flags: Flags::default(),
    })
}

/// `redis.register_function(name, callback)` or
/// `redis.register_function{function_name=..., callback=..., flags=...,
/// description=...}`.
pub(crate) unsafe extern "C-unwind" fn register_function(l: State) -> c_int {
    let Some(ctx) = get_load(l) else {
        convert::push_error(
            l,
            b"redis.register_function can only be called on FUNCTION LOAD command",
        );
        lua_error(l);
    };
    let argc = lua_gettop(l);
    let args = if !(1..=2).contains(&argc) {
        Err("wrong number of arguments to redis.register_function")
    } else if argc == 1 {
        named_args(l)
    } else {
        positional_args(l)
    };
    let err: &[u8] = match args {
        Err(msg) => msg.as_bytes(),
        Ok(args) => {
            let err: Option<&[u8]> = if !valid_name(&args.name) {
                Some(b"Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
            } else if ctx
                .functions
                .iter()
                .any(|(f, _)| f.name.as_bytes() == args.name.as_slice())
            {
                Some(b"Function already exists in the library")
            } else {
                None
            };
            match err {
                Some(e) => {
                    luaL_unref(l, LUA_REGISTRYINDEX, args.func_ref);
                    e
                }
                None => {
                    let function = Function {
                        // Checked: letters, digits and underscores.
                        name: String::from_utf8_lossy(&args.name).into_owned(),
                        description: args.description,
                        flags: args.flags,
                    };
                    ctx.functions.push((function, args.func_ref));
                    return 0;
                }
            }
        }
    };
    convert::push_error(l, err);
    lua_error(l)
}

/// The parts of `FUNCTION LOAD`'s protected run.
pub(crate) struct LoadArgs<'a> {
    pub code: &'a [u8],
    pub ctx: *mut LoadCtx,
    /// The error text, when the load failed.
    pub error: Option<Vec<u8>>,
}

/// Points the globals' metatable `__index` at the registry's `field`
/// (the load-time or the run-time globals).
unsafe fn switch_globals(l: State, field: &std::ffi::CStr) {
    lua_getmetatable(l, LUA_GLOBALSINDEX);
    lua_enablereadonlytable(l, -1, 0);
    lua_getfield(l, LUA_REGISTRYINDEX, field.as_ptr());
    lua_setfield(l, -2, c"__index".as_ptr());
    lua_enablereadonlytable(l, -1, 1);
    lua_pop(l, 1);
}

pub(crate) const LIBRARY_API: &std::ffi::CStr = c"__LIBRARY_API__";
pub(crate) const GLOBALS_API: &std::ffi::CStr = c"__GLOBALS_API__";
pub(crate) const ERROR_HANDLER_KEY: &std::ffi::CStr = c"__ERROR_HANDLER__";

/// `luaEngineCreate`: compiles the code and runs it with the load-time
/// globals so it can register its functions.
pub(crate) unsafe extern "C-unwind" fn load_protected(l: State) -> c_int {
    let a = &mut *(lua_touserdata(l, 1) as *mut LoadArgs);
    lua_settop(l, 0);
    switch_globals(l, LIBRARY_API);
    if luaL_loadbuffer(
        l,
        a.code.as_ptr() as *const _,
        a.code.len(),
        c"@user_function".as_ptr(),
    ) != 0
    {
        let mut msg = b"Error compiling function: ".to_vec();
        msg.extend_from_slice(to_cstr_bytes(l, -1).unwrap_or_default());
        a.error = Some(msg);
        lua_pop(l, 1);
    } else {
        set_load(l, a.ctx);
        lua_sethook(l, Some(load_hook), LUA_MASKCOUNT, crate::HOOK_EVERY);
        if lua_pcall(l, 0, 0, 0) != 0 {
            let info = convert::error_info(l);
            let mut msg = b"Error registering functions: ".to_vec();
            msg.extend_from_slice(&info.msg.unwrap_or_default());
            a.error = Some(msg);
            lua_pop(l, 1);
        }
    }
    switch_globals(l, GLOBALS_API);
    lua_sethook(l, None, 0, 0);
    set_load(l, std::ptr::null_mut());
    0
}

/// The error handler of the function engine (kept in the registry, not
/// a global).
pub(crate) const ERROR_HANDLER: &str = "local dbg = debug\n\
debug = nil\n\
local error_handler = function (err)\n  \
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
end\n\
return error_handler";

/// Sets up the function engine's extra layer (run inside `setup`, after
/// the libraries and the `redis` table): the load-time globals, the
/// error handler, and the empty readonly globals in front of the real
/// ones. The real globals are locked by the caller before this runs.
pub(crate) unsafe fn finish_setup(l: State) {
    // The real globals, for runs.
    lua_pushvalue(l, LUA_GLOBALSINDEX);
    lua_setfield(l, LUA_REGISTRYINDEX, GLOBALS_API.as_ptr());
    // New, empty globals reading through to the real ones.
    lua_newtable(l);
    lua_newtable(l);
    lua_pushvalue(l, LUA_GLOBALSINDEX);
    lua_setfield(l, -2, c"__index".as_ptr());
    lua_enablereadonlytable(l, -1, 1);
    lua_setmetatable(l, -2);
    lua_enablereadonlytable(l, -1, 1);
    lua_replace(l, LUA_GLOBALSINDEX);
}

/// The table of what loading code may use, stored in the registry (run
/// inside `setup`, before the globals are locked).
pub(crate) unsafe fn library_api(l: State) {
    lua_newtable(l);
    lua_newtable(l);
    lua_pushcfunction(l, register_function);
    lua_setfield(l, -2, c"register_function".as_ptr());
    crate::api::register_log(l);
    crate::api::register_version(l);
    crate::set_error_metatable(l);
    lua_setfield(l, -2, c"redis".as_ptr());
    crate::set_error_metatable(l);
    crate::protect_recursively(l);
    lua_setfield(l, LUA_REGISTRYINDEX, LIBRARY_API.as_ptr());

    // The error handler, its chunk run while `debug` is still a global.
    if luaL_loadbuffer(
        l,
        ERROR_HANDLER.as_ptr() as *const _,
        ERROR_HANDLER.len(),
        c"@err_handler_def".as_ptr(),
    ) != 0
    {
        lua_error(l);
    }
    lua_call(l, 0, 1);
    lua_setfield(l, LUA_REGISTRYINDEX, ERROR_HANDLER_KEY.as_ptr());
}

/// Arguments of one `FCALL` (`lua_cpcall` passes a pointer).
pub(crate) struct CallArgs<'a> {
    pub func: c_int,
    pub keys: &'a [&'a [u8]],
    pub args: &'a [&'a [u8]],
    pub name: &'a str,
    pub run: *mut crate::api::Run,
    pub hook: bool,
    pub gc_step: bool,
    pub out: Option<crate::Value>,
}

pub(crate) unsafe extern "C-unwind" fn call_protected(l: State) -> c_int {
    let a = &mut *(lua_touserdata(l, 1) as *mut CallArgs);
    lua_settop(l, 0);
    lua_getfield(l, LUA_REGISTRYINDEX, ERROR_HANDLER_KEY.as_ptr());
    lua_rawgeti(l, LUA_REGISTRYINDEX, a.func as _);
    crate::api::set_run(l, a.run);
    if a.hook {
        lua_sethook(l, Some(crate::count_hook), LUA_MASKCOUNT, crate::HOOK_EVERY);
    }
    crate::push_array(l, a.keys);
    crate::push_array(l, a.args);
    let err = lua_pcall(l, 2, 1, -4);
    if a.gc_step {
        lua_gc(l, LUA_GCSTEP, 50);
    }
    a.out = Some(crate::finish_run(l, err, a.name, (*a.run).resp));
    lua_sethook(l, None, 0, 0);
    crate::api::set_run(l, std::ptr::null_mut());
    0
}

/// Frees a registered callback.
pub(crate) unsafe fn unref(l: State, r: c_int) {
    luaL_unref(l, LUA_REGISTRYINDEX, r);
}
