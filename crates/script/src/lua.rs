//! Thin helpers over Lua 5.1's C API, as the libraries in this crate use it.
//!
//! The Redis libraries are written against the C API (through mlua's `ffi`)
//! rather than mlua's safe wrappers because their behaviour is defined by
//! what the C API does: errors are arbitrary Lua values raised with
//! `lua_error` (a table for `redis.call`), messages carry no Rust-side
//! decoration, and argument errors read "bad argument #1 to 'pack'" as Lua's
//! auxiliary library words them. A Lua error unwinds with `longjmp`, so every
//! function here that raises does so only once nothing with a destructor is
//! left alive in its own frame (see [`raise`]).

use std::ffi::{c_char, c_int, CStr};

pub(crate) use mlua::ffi::*;

/// The interpreter state every C function receives.
pub(crate) type State = *mut lua_State;

/// Lua 5.1's `luaL_checkstack`, as redis's libraries call it: room for
/// `sz` more values, else the error "stack overflow (msg)". (mlua's
/// version of it asks for 20 slots more than it is given, which stops
/// `cmsgpack.unpack` and `struct.unpack` 20 values short of redis's
/// limits.) Before raising, it drops two of the frame's values, which the
/// error discards anyway: at the limit the frame has no room left for the
/// message, which a release build of Lua pushes into its spare slots but a
/// build that checks every push (debug builds) refuses.
#[allow(non_snake_case)]
pub(crate) unsafe fn luaL_checkstack(l: State, sz: c_int, msg: *const c_char) {
    if lua_checkstack(l, sz) == 0 {
        lua_pop(l, lua_gettop(l).min(2));
        luaL_error(l, c"stack overflow (%s)".as_ptr(), msg);
    }
}

unsafe extern "C-unwind" {
    /// redis's patch to Lua (see lua-src/README.respite.md): marks a table
    /// readonly, so that `t[k] = v`, `rawset` and `setmetatable` on it fail.
    pub(crate) fn lua_enablereadonlytable(l: State, idx: c_int, enabled: c_int);
    pub(crate) fn lua_isreadonlytable(l: State, idx: c_int) -> c_int;
}

/// Pushes a byte string.
pub(crate) unsafe fn push_bytes(l: State, b: &[u8]) {
    lua_pushlstring(l, b.as_ptr() as *const c_char, b.len());
}

/// The bytes of the string (or number, converted in place as Lua does) at
/// `idx`, or `None` when the value is neither.
pub(crate) unsafe fn to_bytes<'a>(l: State, idx: c_int) -> Option<&'a [u8]> {
    let mut len = 0usize;
    let p = lua_tolstring(l, idx, &mut len);
    if p.is_null() {
        None
    } else {
        Some(std::slice::from_raw_parts(p as *const u8, len))
    }
}

/// The bytes of the string at `idx` up to its first NUL, as C code that
/// reads a Lua string with `lua_tostring` sees it.
pub(crate) unsafe fn to_cstr_bytes<'a>(l: State, idx: c_int) -> Option<&'a [u8]> {
    let p = lua_tolstring(l, idx, std::ptr::null_mut());
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p).to_bytes())
    }
}

/// `luaL_error`: raises `msg`, prefixed with the position of the Lua code
/// that called the running C function ("user_script:1: "). The message is
/// moved in and dropped before the `longjmp`, so nothing leaks from this
/// frame.
pub(crate) unsafe fn raise(l: State, msg: impl AsRef<[u8]>) -> ! {
    // The raiser may have used up its stack (cjson at its nesting limit).
    lua_checkstack(l, 3);
    luaL_where(l, 1);
    {
        let m = msg;
        push_bytes(l, m.as_ref());
    }
    lua_concat(l, 2);
    lua_error(l)
}

/// `luaL_argerror(L, narg, extramsg)`: "bad argument #n to 'f' (extramsg)".
pub(crate) unsafe fn arg_error(l: State, narg: c_int, extramsg: &CStr) -> ! {
    luaL_argerror(l, narg, extramsg.as_ptr());
    unreachable!("luaL_argerror returned")
}

/// Registers `funcs` as the fields of the table at the top of the stack.
pub(crate) unsafe fn set_funcs(l: State, funcs: &[(&CStr, lua_CFunction)]) {
    for (name, f) in funcs {
        lua_pushcfunction(l, *f);
        lua_setfield(l, -2, name.as_ptr());
    }
}

/// Sets `t[name] = n` on the table at the top of the stack.
pub(crate) unsafe fn set_number(l: State, name: &CStr, n: f64) {
    lua_pushnumber(l, n);
    lua_setfield(l, -2, name.as_ptr());
}

/// `n` as C's `printf("%.<precision>g")` writes it (Lua's own number
/// format is `%.14g`; redis formats numbers passed to commands with `%.17g`).
pub(crate) fn fmt_g(n: f64, precision: c_int) -> Vec<u8> {
    let mut buf = [0u8; 64];
    // SAFETY: the buffer is 64 bytes and `%.17g` of a double is at most 24.
    let len = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut c_char,
            buf.len(),
            c"%.*g".as_ptr(),
            precision,
            n,
        )
    };
    buf[..(len.max(0) as usize).min(buf.len() - 1)].to_vec()
}

/// Pushes a growable byte buffer owned by a Lua userdata and returns it: an
/// error raised while it is in use (out of memory, a metamethod) leaves it
/// to the garbage collector instead of leaking it past the `longjmp`.
pub(crate) unsafe fn push_buffer<'a>(l: State) -> &'a mut Vec<u8> {
    unsafe extern "C-unwind" fn gc(l: State) -> c_int {
        let p = lua_touserdata(l, 1) as *mut Vec<u8>;
        if !p.is_null() {
            std::ptr::drop_in_place(p);
        }
        0
    }
    let p = lua_newuserdata(l, std::mem::size_of::<Vec<u8>>()) as *mut Vec<u8>;
    std::ptr::write(p, Vec::new());
    if luaL_newmetatable(l, c"respite.buffer".as_ptr()) != 0 {
        lua_pushcfunction(l, gc);
        lua_setfield(l, -2, c"__gc".as_ptr());
    }
    lua_setmetatable(l, -2);
    &mut *p
}
