//! The `cmsgpack` library redis loads (`lua_cmsgpack.c`, lua-cmsgpack
//! 0.4.0): MessagePack `pack`, `unpack`, `unpack_one` and `unpack_limit`.
//!
//! Its choices are redis's, byte for byte: a number that is a whole 64-bit
//! integer packs as the smallest integer form, any other number as a float
//! (`0xca`) when a single-precision float holds it exactly, else a double; a
//! string is `fixstr`/`str8`/`str16`/`str32`; a table whose keys are exactly
//! 1..n is an array, any other a map (in `next` order), and tables nested
//! deeper than 16 pack as nil (so cycles end). Unpacking turns a `uint64`
//! past 2^63 into a negative number, as the C code's `lua_pushinteger`
//! does, and arrays into tables indexed from 1.

use std::ffi::c_int;

use crate::lua::*;

const MAX_NESTING: c_int = 16;

fn encode_bytes(buf: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        buf.push(0xa0 | len as u8);
    } else if len <= 0xff {
        buf.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        buf.push(0xda);
        buf.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        buf.push(0xdb);
        buf.extend_from_slice(&(len as u32).to_be_bytes());
    }
    buf.extend_from_slice(s);
}

fn encode_double(buf: &mut Vec<u8>, d: f64) {
    let f = d as f32;
    if d == f as f64 {
        buf.push(0xca);
        buf.extend_from_slice(&f.to_be_bytes());
    } else {
        buf.push(0xcb);
        buf.extend_from_slice(&d.to_be_bytes());
    }
}

fn encode_int(buf: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            buf.push(n as u8);
        } else if n <= 0xff {
            buf.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            buf.push(0xcd);
            buf.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            buf.push(0xce);
            buf.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            buf.push(0xcf);
            buf.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        buf.push(n as i8 as u8);
    } else if n >= -128 {
        buf.extend_from_slice(&[0xd0, n as u8]);
    } else if n >= -32768 {
        buf.push(0xd1);
        buf.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        buf.push(0xd2);
        buf.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        buf.push(0xd3);
        buf.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_len(buf: &mut Vec<u8>, n: u64, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        buf.push(fix | (n as u8 & 0xf));
    } else if n <= 65535 {
        buf.push(b16);
        buf.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        buf.push(b32);
        buf.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// `IS_INT64_EQUIVALENT`: finite and equal to its cast to `int64_t` (a cast
/// that, on x86, turns anything out of range into `INT64_MIN`).
pub(crate) fn is_int64(n: f64) -> bool {
    if !n.is_finite() || !(-9223372036854775808.0..9223372036854775808.0).contains(&n) {
        return false;
    }
    (n as i64) as f64 == n
}

/// `table_is_an_array`: keys exactly 1..n, all numbers that are C `int`s.
unsafe fn table_is_an_array(l: State) -> bool {
    let top = lua_gettop(l);
    let (mut count, mut max) = (0i64, 0i64);
    luaL_checkstack(l, 2, c"in function table_is_an_array".as_ptr());
    lua_pushnil(l);
    while lua_next(l, -2) != 0 {
        lua_pop(l, 1);
        let n = lua_tonumber(l, -1);
        let is_int = n.is_finite() && (n as i32) as f64 == n;
        if lua_type(l, -1) != LUA_TNUMBER || n <= 0.0 || !is_int {
            lua_settop(l, top);
            return false;
        }
        max = max.max(n as i64);
        count += 1;
    }
    lua_settop(l, top);
    max == count
}

/// `mp_encode_lua_type`: encodes and pops the value at the top.
unsafe fn encode(l: State, buf: &mut Vec<u8>, level: c_int) {
    if crate::output_too_long(buf.len()) {
        raise(l, "not enough memory");
    }
    let mut t = lua_type(l, -1);
    if t == LUA_TTABLE && level == MAX_NESTING {
        t = LUA_TNIL;
    }
    match t {
        LUA_TSTRING => encode_bytes(buf, to_bytes(l, -1).unwrap_or_default()),
        LUA_TBOOLEAN => buf.push(if lua_toboolean(l, -1) != 0 {
            0xc3
        } else {
            0xc2
        }),
        LUA_TNUMBER => {
            let n = lua_tonumber(l, -1);
            if is_int64(n) {
                encode_int(buf, lua_tointeger(l, -1) as i64);
            } else {
                encode_double(buf, n);
            }
        }
        LUA_TTABLE => {
            if table_is_an_array(l) {
                let len = lua_objlen(l, -1);
                encode_len(buf, len as u64, 0x90, 0xdc, 0xdd);
                luaL_checkstack(l, 1, c"in function mp_encode_lua_table_as_array".as_ptr());
                for j in 1..=len {
                    lua_pushnumber(l, j as f64);
                    lua_gettable(l, -2);
                    encode(l, buf, level + 1);
                }
            } else {
                luaL_checkstack(l, 3, c"in function mp_encode_lua_table_as_map".as_ptr());
                let mut len = 0u64;
                lua_pushnil(l);
                while lua_next(l, -2) != 0 {
                    lua_pop(l, 1);
                    len += 1;
                }
                encode_len(buf, len, 0x80, 0xde, 0xdf);
                lua_pushnil(l);
                while lua_next(l, -2) != 0 {
                    lua_pushvalue(l, -2);
                    encode(l, buf, level + 1);
                    encode(l, buf, level + 1);
                }
            }
        }
        _ => buf.push(0xc0),
    }
    lua_pop(l, 1);
}

unsafe extern "C-unwind" fn pack(l: State) -> c_int {
    let nargs = lua_gettop(l);
    if nargs == 0 {
        arg_error(l, 0, c"MessagePack pack needs input.");
    }
    if lua_checkstack(l, nargs) == 0 {
        arg_error(l, 0, c"Too many arguments for MessagePack pack.");
    }
    let buf = push_buffer(l) as *mut Vec<u8>;
    lua_insert(l, 1);
    for i in 2..=nargs + 1 {
        luaL_checkstack(l, 1, c"in function mp_check".as_ptr());
        lua_pushvalue(l, i);
        encode(l, &mut *buf, 0);
        push_bytes(l, &*buf);
        (*buf).clear();
    }
    lua_concat(l, nargs);
    1
}

/// Why decoding stopped short.
enum DecodeError {
    Eof,
    BadFormat,
}

struct Cursor<'a> {
    s: &'a [u8],
    p: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.s.len() - self.p
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.left() < n {
            Err(DecodeError::Eof)
        } else {
            Ok(())
        }
    }

    fn at(&self, i: usize) -> u8 {
        self.s[self.p + i]
    }

    fn be(&self, from: usize, n: usize) -> u64 {
        let mut v = 0u64;
        for i in 0..n {
            v = (v << 8) | self.at(from + i) as u64;
        }
        v
    }
}

unsafe fn decode_array(l: State, c: &mut Cursor, len: usize) -> Result<(), DecodeError> {
    lua_newtable(l);
    luaL_checkstack(l, 1, c"in function mp_decode_to_lua_array".as_ptr());
    for index in 1..=len {
        lua_pushnumber(l, index as f64);
        decode(l, c)?;
        lua_settable(l, -3);
    }
    Ok(())
}

unsafe fn decode_hash(l: State, c: &mut Cursor, len: usize) -> Result<(), DecodeError> {
    lua_newtable(l);
    for _ in 0..len {
        decode(l, c)?;
        decode(l, c)?;
        lua_settable(l, -3);
    }
    Ok(())
}

unsafe fn push_str(l: State, c: &mut Cursor, at: usize, len: usize) -> Result<(), DecodeError> {
    c.need(at + len)?;
    push_bytes(l, &c.s[c.p + at..c.p + at + len]);
    c.p += at + len;
    Ok(())
}

/// `mp_decode_to_lua_type`: pushes the next value.
unsafe fn decode(l: State, c: &mut Cursor) -> Result<(), DecodeError> {
    c.need(1)?;
    luaL_checkstack(
        l,
        1,
        c"too many return values at once; use unpack_one or unpack_limit instead.".as_ptr(),
    );
    let b = c.at(0);
    match b {
        0xcc => {
            c.need(2)?;
            lua_pushinteger(l, c.at(1) as _);
            c.p += 2;
        }
        0xd0 => {
            c.need(2)?;
            lua_pushinteger(l, c.at(1) as i8 as _);
            c.p += 2;
        }
        0xcd => {
            c.need(3)?;
            lua_pushinteger(l, c.be(1, 2) as _);
            c.p += 3;
        }
        0xd1 => {
            c.need(3)?;
            lua_pushinteger(l, c.be(1, 2) as u16 as i16 as _);
            c.p += 3;
        }
        0xce => {
            c.need(5)?;
            lua_pushinteger(l, c.be(1, 4) as _);
            c.p += 5;
        }
        0xd2 => {
            c.need(5)?;
            lua_pushinteger(l, c.be(1, 4) as u32 as i32 as _);
            c.p += 5;
        }
        0xcf => {
            c.need(9)?;
            lua_pushinteger(l, c.be(1, 8) as i64 as _);
            c.p += 9;
        }
        0xd3 => {
            c.need(9)?;
            lua_pushnumber(l, c.be(1, 8) as i64 as f64);
            c.p += 9;
        }
        0xc0 => {
            lua_pushnil(l);
            c.p += 1;
        }
        0xc3 => {
            lua_pushboolean(l, 1);
            c.p += 1;
        }
        0xc2 => {
            lua_pushboolean(l, 0);
            c.p += 1;
        }
        0xca => {
            c.need(5)?;
            lua_pushnumber(l, f32::from_bits(c.be(1, 4) as u32) as f64);
            c.p += 5;
        }
        0xcb => {
            c.need(9)?;
            lua_pushnumber(l, f64::from_bits(c.be(1, 8)));
            c.p += 9;
        }
        0xd9 => {
            c.need(2)?;
            let len = c.at(1) as usize;
            push_str(l, c, 2, len)?;
        }
        0xda => {
            c.need(3)?;
            let len = c.be(1, 2) as usize;
            push_str(l, c, 3, len)?;
        }
        0xdb => {
            c.need(5)?;
            let len = c.be(1, 4) as usize;
            c.p += 5;
            push_str(l, c, 0, len)?;
        }
        0xdc | 0xde => {
            c.need(3)?;
            let len = c.be(1, 2) as usize;
            c.p += 3;
            if b == 0xdc {
                decode_array(l, c, len)?;
            } else {
                decode_hash(l, c, len)?;
            }
        }
        0xdd | 0xdf => {
            c.need(5)?;
            let len = c.be(1, 4) as usize;
            c.p += 5;
            if b == 0xdd {
                decode_array(l, c, len)?;
            } else {
                decode_hash(l, c, len)?;
            }
        }
        _ if b & 0x80 == 0 => {
            lua_pushinteger(l, b as _);
            c.p += 1;
        }
        _ if b & 0xe0 == 0xe0 => {
            lua_pushinteger(l, b as i8 as _);
            c.p += 1;
        }
        _ if b & 0xe0 == 0xa0 => push_str(l, c, 1, (b & 0x1f) as usize)?,
        _ if b & 0xf0 == 0x90 => {
            c.p += 1;
            decode_array(l, c, (b & 0xf) as usize)?;
        }
        _ if b & 0xf0 == 0x80 => {
            c.p += 1;
            decode_hash(l, c, (b & 0xf) as usize)?;
        }
        _ => return Err(DecodeError::BadFormat),
    }
    Ok(())
}

unsafe fn unpack_full(l: State, limit: isize, offset: isize) -> c_int {
    let mut len = 0usize;
    let s = luaL_checklstring(l, 1, &mut len) as *const u8;
    let s = std::slice::from_raw_parts(s, len);
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        raise(
            l,
            format!(
                "Invalid request to unpack with offset of {} and limit of {}.",
                offset as c_int, len as c_int
            ),
        );
    } else if offset as usize > len {
        raise(
            l,
            format!(
                "Start offset {} greater than input length {}.",
                offset as c_int, len as c_int
            ),
        );
    }
    let limit = if decode_all {
        c_int::MAX as isize
    } else {
        limit
    };
    let mut c = Cursor {
        s,
        p: offset as usize,
    };
    let mut cnt: c_int = 0;
    while c.left() > 0 && (cnt as isize) < limit {
        match decode(l, &mut c) {
            Ok(()) => {}
            Err(DecodeError::Eof) => raise(l, "Missing bytes in input."),
            Err(DecodeError::BadFormat) => raise(l, "Bad data format in input."),
        }
        cnt += 1;
    }
    if !decode_all {
        luaL_checkstack(l, 1, c"in function mp_unpack_full".as_ptr());
        let next = if c.left() == 0 { -1 } else { c.p as isize };
        lua_pushinteger(l, next as _);
        lua_insert(l, 2);
        cnt += 1;
    }
    cnt
}

unsafe extern "C-unwind" fn unpack(l: State) -> c_int {
    unpack_full(l, 0, 0)
}

unsafe extern "C-unwind" fn unpack_one(l: State) -> c_int {
    let offset = luaL_optinteger(l, 2, 0);
    lua_pop(l, lua_gettop(l) - 1);
    unpack_full(l, 1, offset as isize)
}

unsafe extern "C-unwind" fn unpack_limit(l: State) -> c_int {
    let limit = luaL_checkinteger(l, 2);
    let offset = luaL_optinteger(l, 3, 0);
    lua_pop(l, lua_gettop(l) - 1);
    unpack_full(l, limit as isize, offset as isize)
}

/// `luaopen_cmsgpack`: leaves the `cmsgpack` table on the stack.
pub(crate) unsafe extern "C-unwind" fn open(l: State) -> c_int {
    lua_newtable(l);
    set_funcs(
        l,
        &[
            (c"pack", pack),
            (c"unpack", unpack),
            (c"unpack_one", unpack_one),
            (c"unpack_limit", unpack_limit),
        ],
    );
    for (k, v) in [
        (c"_NAME", "cmsgpack"),
        (c"_VERSION", "lua-cmsgpack 0.4.0"),
        (c"_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo"),
        (c"_DESCRIPTION", "MessagePack C implementation for Lua"),
    ] {
        push_bytes(l, v.as_bytes());
        lua_setfield(l, -2, k.as_ptr());
    }
    1
}
