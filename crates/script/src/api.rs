//! The `redis` table a script sees, and the replacements redis makes in the
//! base library (`pcall`, `math.random`, `math.randomseed`), written as
//! redis 7.0 writes them in `script_lua.c` and `eval.c`.
//!
//! Functions that need the running script (`redis.call`, `setresp`, ...)
//! find it through a pointer kept in the Lua registry for the length of one
//! run ([`Run`]); outside a run they raise redis's "can only be called
//! inside a script invocation".

use std::ffi::c_int;

use sha1::{Digest, Sha1};

use crate::convert::{push_error, push_reply};
use crate::lua::*;
use crate::{Host, LogLevel};

/// The registry key (its address) under which the current run is kept.
static RUN_KEY: u8 = 0;

/// One script invocation, as the callbacks see it.
pub(crate) struct Run {
    /// The caller's side: runs commands, checks ACLs, logs.
    pub host: *mut (dyn Host + 'static),
    /// The protocol of `redis.call`'s replies and of booleans returned
    /// (`redis.setresp`).
    pub resp: u8,
    /// `redis.set_repl`'s last setting.
    pub repl: c_int,
    /// redis's `math.random` generator, one per interpreter.
    pub rand: *mut Rand48,
    /// Set once the host asked for the script to be stopped.
    pub killed: bool,
}

/// Makes `run` the current run (or none, with a null pointer).
pub(crate) unsafe fn set_run(l: State, run: *mut Run) {
    lua_pushlightuserdata(l, &RUN_KEY as *const u8 as *mut _);
    if run.is_null() {
        lua_pushnil(l);
    } else {
        lua_pushlightuserdata(l, run as *mut _);
    }
    lua_rawset(l, LUA_REGISTRYINDEX);
}

pub(crate) unsafe fn get_run<'a>(l: State) -> Option<&'a mut Run> {
    lua_pushlightuserdata(l, &RUN_KEY as *const u8 as *mut _);
    lua_rawget(l, LUA_REGISTRYINDEX);
    let p = lua_touserdata(l, -1) as *mut Run;
    lua_pop(l, 1);
    p.as_mut()
}

/// Pushes `{err=...}` for `text` and raises it.
unsafe fn raise_error(l: State, text: &[u8]) -> ! {
    push_error(l, text);
    lua_error(l)
}

/// `luaArgsToRedisArgv`: the arguments as strings (numbers with `%.17g`),
/// popped; on failure the error table is pushed and `None` returned.
/// A number argument of `redis.call` as redis writes it (`%.17g`): a
/// whole number below 2^53 prints as its digits, which a plain integer
/// format gives without the C library's float formatting.
fn number_arg(n: f64) -> Vec<u8> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() < EXACT && !(n == 0.0 && n.is_sign_negative()) {
        return (n as i64).to_string().into_bytes();
    }
    fmt_g(n, 17)
}

unsafe fn args(l: State) -> Option<Vec<Vec<u8>>> {
    let argc = lua_gettop(l);
    if argc == 0 {
        push_error(
            l,
            b"Please specify at least one argument for this redis lib call",
        );
        return None;
    }
    let mut argv = Vec::with_capacity(argc as usize);
    for j in 1..=argc {
        if lua_type(l, j) == LUA_TNUMBER {
            argv.push(number_arg(lua_tonumber(l, j)));
        } else {
            match to_bytes(l, j) {
                Some(b) => argv.push(b.to_vec()),
                None => break,
            }
        }
    }
    lua_pop(l, argc);
    if argv.len() != argc as usize {
        drop(argv);
        push_error(
            l,
            b"Lua redis lib command arguments must be strings or integers",
        );
        return None;
    }
    Some(argv)
}

/// What a call left on the stack: a value to return, or an error table to
/// raise.
enum Outcome {
    Return,
    Raise,
}

unsafe fn generic_command(l: State, raise_errors: bool) -> Outcome {
    let Some(run) = get_run(l) else {
        push_error(
            l,
            b"redis.call/pcall can only be called inside a script invocation",
        );
        return Outcome::Raise;
    };
    let Some(argv) = args(l) else {
        return if raise_errors {
            Outcome::Raise
        } else {
            Outcome::Return
        };
    };
    let host = &mut *run.host;
    match host.call(argv, run.resp) {
        Err(err) => {
            push_error(l, &err);
            drop(err);
            push_bytes(l, b"ignore_error_stats_update");
            lua_pushboolean(l, 1);
            lua_settable(l, -3);
            if raise_errors {
                Outcome::Raise
            } else {
                Outcome::Return
            }
        }
        Ok(reply) => {
            let is_error = reply.first() == Some(&b'-');
            push_reply(l, &reply);
            drop(reply);
            if raise_errors && is_error {
                Outcome::Raise
            } else {
                Outcome::Return
            }
        }
    }
}

unsafe extern "C-unwind" fn call(l: State) -> c_int {
    match generic_command(l, true) {
        Outcome::Return => 1,
        Outcome::Raise => lua_error(l),
    }
}

unsafe extern "C-unwind" fn pcall_command(l: State) -> c_int {
    match generic_command(l, false) {
        Outcome::Return => 1,
        Outcome::Raise => lua_error(l),
    }
}

/// redis's `pcall`: as Lua's, but an error table with a string `err`
/// comes back as that string (scripts written for redis < 7 compare it).
pub(crate) unsafe extern "C-unwind" fn pcall(l: State) -> c_int {
    let argc = lua_gettop(l);
    lua_pushboolean(l, 1);
    lua_insert(l, 1);
    if lua_pcall(l, argc - 1, LUA_MULTRET, 0) != 0 {
        lua_remove(l, 1);
        if lua_istable(l, -1) != 0 {
            lua_getfield(l, -1, c"err".as_ptr());
            if lua_isstring(l, -1) != 0 {
                lua_replace(l, -2);
            }
        }
        lua_pushboolean(l, 0);
        lua_insert(l, 1);
    }
    lua_gettop(l)
}

pub(crate) fn sha1hex(data: &[u8]) -> String {
    let digest = Sha1::digest(data);
    let mut s = String::with_capacity(40);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

unsafe extern "C-unwind" fn sha1hex_fn(l: State) -> c_int {
    if lua_gettop(l) != 1 {
        raise_error(l, b"wrong number of arguments");
    }
    let hex = sha1hex(to_bytes(l, 1).unwrap_or_default());
    push_bytes(l, hex.as_bytes());
    1
}

unsafe extern "C-unwind" fn error_reply(l: State) -> c_int {
    if lua_gettop(l) != 1 || lua_type(l, -1) != LUA_TSTRING {
        push_error(l, b"wrong number or type of arguments");
        return 1;
    }
    let err = to_cstr_bytes(l, -1).unwrap_or_default();
    if err.first() == Some(&b'-') {
        push_error(l, err);
    } else {
        let mut e = Vec::with_capacity(err.len() + 1);
        e.push(b'-');
        e.extend_from_slice(err);
        push_error(l, &e);
    }
    1
}

unsafe extern "C-unwind" fn status_reply(l: State) -> c_int {
    if lua_gettop(l) != 1 || lua_type(l, -1) != LUA_TSTRING {
        push_error(l, b"wrong number or type of arguments");
        return 1;
    }
    lua_newtable(l);
    lua_pushstring(l, c"ok".as_ptr());
    lua_pushvalue(l, -3);
    lua_settable(l, -3);
    1
}

unsafe extern "C-unwind" fn set_repl(l: State) -> c_int {
    let Some(run) = get_run(l) else {
        raise_error(
            l,
            b"redis.set_repl can only be called inside a script invocation",
        );
    };
    if lua_gettop(l) != 1 {
        raise_error(l, b"redis.set_repl() requires two arguments.");
    }
    let flags = lua_tonumber(l, -1) as c_int;
    if flags & !3 != 0 {
        raise_error(
            l,
            b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        );
    }
    run.repl = flags;
    0
}

unsafe extern "C-unwind" fn acl_check_cmd(l: State) -> c_int {
    let Some(run) = get_run(l) else {
        raise_error(
            l,
            b"redis.acl_check_cmd can only be called inside a script invocation",
        );
    };
    let Some(argv) = args(l) else {
        lua_error(l);
    };
    let allowed = (*run.host).acl_check(&argv);
    drop(argv);
    match allowed {
        None => raise_error(l, b"Invalid command passed to redis.acl_check_cmd()"),
        Some(ok) => lua_pushboolean(l, ok as c_int),
    }
    1
}

unsafe extern "C-unwind" fn log(l: State) -> c_int {
    let argc = lua_gettop(l);
    if argc < 2 {
        raise_error(l, b"redis.log() requires two arguments or more.");
    } else if lua_isnumber(l, -argc) == 0 {
        raise_error(l, b"First argument must be a number (log level).");
    }
    let level = lua_tonumber(l, -argc) as c_int;
    let level = match level {
        0 => LogLevel::Debug,
        1 => LogLevel::Verbose,
        2 => LogLevel::Notice,
        3 => LogLevel::Warning,
        _ => raise_error(l, b"Invalid debug level."),
    };
    let mut msg = Vec::new();
    for j in 1..argc {
        if let Some(s) = to_bytes(l, -argc + j) {
            if j != 1 {
                msg.push(b' ');
            }
            msg.extend_from_slice(s);
        }
    }
    if let Some(run) = get_run(l) {
        (*run.host).log(level, &msg);
    } else {
        crate::log_outside_run(level, &msg);
    }
    0
}

unsafe extern "C-unwind" fn setresp(l: State) -> c_int {
    let Some(run) = get_run(l) else {
        raise_error(
            l,
            b"redis.setresp can only be called inside a script invocation",
        );
    };
    if lua_gettop(l) != 1 {
        raise_error(l, b"redis.setresp() requires one argument.");
    }
    let resp = lua_tonumber(l, 1) as c_int;
    if resp != 2 && resp != 3 {
        raise_error(l, b"RESP version must be 2 or 3.");
    }
    run.resp = resp as u8;
    0
}

unsafe extern "C-unwind" fn breakpoint(l: State) -> c_int {
    // No debugger session is ever active: redis answers false then.
    lua_pushboolean(l, 0);
    1
}

unsafe extern "C-unwind" fn debug(_l: State) -> c_int {
    0
}

unsafe extern "C-unwind" fn replicate_commands(l: State) -> c_int {
    lua_pushboolean(l, 1);
    1
}

/// redis's `redisLrand48`/`redisSrand48`: the same sequence for the same
/// seed on every platform.
pub(crate) struct Rand48 {
    x: [u32; 3],
}

const RAND48_MAX: i64 = i32::MAX as i64;

impl Rand48 {
    pub(crate) fn new() -> Rand48 {
        Rand48 {
            x: [0x330E, 0xABCD, 0x1234],
        }
    }

    fn seed(&mut self, seed: i32) {
        self.x = [
            0x330E,
            (seed as u32) & 0xffff,
            ((seed as u32) >> 16) & 0xffff,
        ];
    }

    fn next(&mut self) -> i32 {
        // x = a*x + c mod 2^48 with a = 0x5DEECE66D, c = 0xB.
        let x = (self.x[2] as u64) << 32 | (self.x[1] as u64) << 16 | self.x[0] as u64;
        let x = x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB) & 0xffff_ffff_ffff;
        self.x = [
            (x & 0xffff) as u32,
            ((x >> 16) & 0xffff) as u32,
            ((x >> 32) & 0xffff) as u32,
        ];
        ((self.x[2] as i32) << 15).wrapping_add((self.x[1] >> 1) as i32)
    }
}

unsafe extern "C-unwind" fn math_random(l: State) -> c_int {
    let Some(run) = get_run(l) else {
        raise(
            l,
            "math.random can only be called inside a script invocation",
        );
    };
    let r = ((*run.rand).next() as i64 % RAND48_MAX) as f64 / RAND48_MAX as f64;
    match lua_gettop(l) {
        0 => lua_pushnumber(l, r),
        1 => {
            let u = luaL_checkinteger(l, 1) as c_int;
            if 1 > u {
                arg_error(l, 1, c"interval is empty");
            }
            lua_pushnumber(l, (r * u as f64).floor() + 1.0);
        }
        2 => {
            let lo = luaL_checkinteger(l, 1) as c_int;
            let u = luaL_checkinteger(l, 2) as c_int;
            if lo > u {
                arg_error(l, 2, c"interval is empty");
            }
            lua_pushnumber(l, (r * (u as f64 - lo as f64 + 1.0)).floor() + lo as f64);
        }
        _ => raise(l, "wrong number of arguments"),
    }
    1
}

unsafe extern "C-unwind" fn math_randomseed(l: State) -> c_int {
    let Some(run) = get_run(l) else {
        raise(
            l,
            "math.randomseed can only be called inside a script invocation",
        );
    };
    let seed = luaL_checkinteger(l, 1) as c_int;
    (*run.rand).seed(seed);
    0
}

/// `luaRegisterRedisAPI` plus the debugger-facing functions `eval.c`
/// adds: installs `pcall`, the `redis` table and redis's `math.random`.
pub(crate) unsafe fn register(l: State) {
    lua_pushcfunction(l, pcall);
    lua_setfield(l, LUA_GLOBALSINDEX, c"pcall".as_ptr());

    lua_newtable(l);
    set_funcs(l, &[(c"call", call), (c"pcall", pcall_command)]);
    register_log(l);
    register_version(l);
    set_funcs(
        l,
        &[
            (c"setresp", setresp),
            (c"sha1hex", sha1hex_fn),
            (c"error_reply", error_reply),
            (c"status_reply", status_reply),
            (c"set_repl", set_repl),
        ],
    );
    set_number(l, c"REPL_NONE", 0.0);
    set_number(l, c"REPL_AOF", 1.0);
    set_number(l, c"REPL_SLAVE", 2.0);
    set_number(l, c"REPL_REPLICA", 2.0);
    set_number(l, c"REPL_ALL", 3.0);
    set_funcs(l, &[(c"acl_check_cmd", acl_check_cmd)]);
    lua_setfield(l, LUA_GLOBALSINDEX, c"redis".as_ptr());

    lua_getfield(l, LUA_GLOBALSINDEX, c"math".as_ptr());
    set_funcs(
        l,
        &[(c"random", math_random), (c"randomseed", math_randomseed)],
    );
    lua_setfield(l, LUA_GLOBALSINDEX, c"math".as_ptr());
}

/// `luaRegisterLogFunction`: `log` and the `LOG_*` levels, on the table
/// at the top of the stack.
pub(crate) unsafe fn register_log(l: State) {
    set_funcs(l, &[(c"log", log)]);
    set_number(l, c"LOG_DEBUG", 0.0);
    set_number(l, c"LOG_VERBOSE", 1.0);
    set_number(l, c"LOG_NOTICE", 2.0);
    set_number(l, c"LOG_WARNING", 3.0);
}

/// `luaRegisterVersion`: `REDIS_VERSION_NUM` and `REDIS_VERSION`, on the
/// table at the top of the stack.
pub(crate) unsafe fn register_version(l: State) {
    set_number(l, c"REDIS_VERSION_NUM", crate::REDIS_VERSION_NUM as f64);
    push_bytes(l, crate::REDIS_VERSION.as_bytes());
    lua_setfield(l, -2, c"REDIS_VERSION".as_ptr());
}

/// The functions `eval.c` adds to `redis` for EVAL's interpreter.
pub(crate) unsafe fn register_eval_extras(l: State) {
    lua_getfield(l, LUA_GLOBALSINDEX, c"redis".as_ptr());
    set_funcs(
        l,
        &[
            (c"breakpoint", breakpoint),
            (c"debug", debug),
            (c"replicate_commands", replicate_commands),
        ],
    );
    lua_setfield(l, LUA_GLOBALSINDEX, c"redis".as_ptr());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_args_print_as_percent_17g() {
        for n in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            3600.0,
            1e15,
            1e16,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            -9_007_199_254_740_993.0,
            1e17,
            1e300,
            0.1,
            -2.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ] {
            assert_eq!(number_arg(n), fmt_g(n, 17), "{n}");
        }
    }
}
