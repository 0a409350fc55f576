//! Conversions between command replies and Lua values, and from a script's
//! return value to the reply its caller gets, as redis 7.0's
//! `redisProtocolToLuaType` and `luaReplyToRedisReply` do them.
//!
//! A command's reply arrives as RESP bytes in the protocol the script
//! selected (`redis.setresp`, 2 by default), so the conversion into Lua is
//! redis's own, type by type: RESP2 nil bulk and nil array become `false`,
//! a status `{ok=...}`, an error `{err=...}`; RESP3 null is `nil`, a double
//! `{double=n}`, a map `{map={...}}`, a set `{set={k=true}}`, a big number
//! `{big_number=s}`, a verbatim string `{verbatim_string={format=,string=}}`,
//! and attributes are skipped.

use std::ffi::{c_int, CStr};

use crate::lua::*;
use crate::Value;

/// A RESP reply being read into Lua.
struct Reader<'a> {
    s: &'a [u8],
    p: usize,
}

impl<'a> Reader<'a> {
    fn line(&mut self) -> &'a [u8] {
        let start = self.p;
        let end = memchr_crlf(&self.s[start..]).map_or(self.s.len(), |i| start + i);
        self.p = (end + 2).min(self.s.len());
        &self.s[start..end]
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.p.min(self.s.len());
        let end = (start + n).min(self.s.len());
        self.p = (end + 2).min(self.s.len());
        &self.s[start..end]
    }
}

fn memchr_crlf(s: &[u8]) -> Option<usize> {
    s.windows(2).position(|w| w == b"\r\n")
}

fn parse_i64(s: &[u8]) -> i64 {
    std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

fn parse_f64(s: &[u8]) -> f64 {
    let t = std::str::from_utf8(s).unwrap_or("0");
    t.parse().unwrap_or(0.0)
}

unsafe fn check_stack(l: State, n: c_int) {
    if lua_checkstack(l, n) == 0 {
        raise(l, "lua stack limit reach when parsing redis.call reply");
    }
}

/// Pushes the reply `bytes` as a Lua value (`lua` is false while an
/// attribute is skipped: the value is read and dropped).
pub(crate) unsafe fn push_reply(l: State, bytes: &[u8]) {
    let mut r = Reader { s: bytes, p: 0 };
    read(l, &mut r, true);
}

unsafe fn read(l: State, r: &mut Reader, lua: bool) {
    let Some(&kind) = r.s.get(r.p) else {
        if lua {
            lua_pushnil(l);
        }
        return;
    };
    r.p += 1;
    let line = r.line();
    match kind {
        b':' => {
            if lua {
                check_stack(l, 1);
                lua_pushnumber(l, parse_i64(line) as f64);
            }
        }
        b'$' | b'=' => {
            let n = parse_i64(line);
            if n < 0 {
                if lua {
                    check_stack(l, 1);
                    lua_pushboolean(l, 0);
                }
                return;
            }
            let data = r.take(n as usize);
            if !lua {
                return;
            }
            if kind == b'$' {
                check_stack(l, 1);
                push_bytes(l, data);
            } else {
                check_stack(l, 5);
                let (format, text) = if data.len() >= 4 {
                    (&data[..3], &data[4..])
                } else {
                    (&b"txt"[..], data)
                };
                lua_newtable(l);
                push_bytes(l, b"verbatim_string");
                lua_newtable(l);
                push_bytes(l, b"string");
                push_bytes(l, text);
                lua_settable(l, -3);
                push_bytes(l, b"format");
                push_bytes(l, format);
                lua_settable(l, -3);
                lua_settable(l, -3);
            }
        }
        b'+' => {
            if lua {
                check_stack(l, 3);
                lua_newtable(l);
                push_bytes(l, b"ok");
                push_bytes(l, line);
                lua_settable(l, -3);
            }
        }
        b'-' => {
            if lua {
                check_stack(l, 3);
                let mut e = Vec::with_capacity(line.len() + 1);
                e.push(b'-');
                e.extend_from_slice(line);
                push_error(l, &e);
                push_bytes(l, b"ignore_error_stats_update");
                lua_pushboolean(l, 1);
                lua_settable(l, -3);
            }
        }
        b'*' | b'~' | b'%' | b'|' | b'>' => {
            let n = parse_i64(line);
            if n < 0 {
                if lua {
                    check_stack(l, 1);
                    lua_pushboolean(l, 0);
                }
                return;
            }
            let n = n as usize;
            match kind {
                b'*' | b'>' => {
                    if lua {
                        check_stack(l, 2);
                        lua_newtable(l);
                    }
                    for j in 0..n {
                        if lua {
                            lua_pushnumber(l, (j + 1) as f64);
                        }
                        read(l, r, lua);
                        if lua {
                            lua_settable(l, -3);
                        }
                    }
                }
                b'%' | b'~' => {
                    // redis's `{map={...}}` and `{set={...}}`, a set's
                    // members each mapped to true.
                    if lua {
                        check_stack(l, 3);
                        lua_newtable(l);
                        push_bytes(l, if kind == b'%' { b"map" } else { b"set" });
                        lua_newtable(l);
                    }
                    for _ in 0..n {
                        read(l, r, lua);
                        if kind == b'%' {
                            read(l, r, lua);
                        } else if lua {
                            check_stack(l, 1);
                            lua_pushboolean(l, 1);
                        }
                        if lua {
                            lua_settable(l, -3);
                        }
                    }
                    if lua {
                        lua_settable(l, -3);
                    }
                }
                _ => {
                    // An attribute: read and dropped, then the reply itself.
                    for _ in 0..n {
                        read(l, r, false);
                        read(l, r, false);
                    }
                    read(l, r, lua);
                }
            }
        }
        b'_' => {
            if lua {
                check_stack(l, 1);
                lua_pushnil(l);
            }
        }
        b'#' => {
            if lua {
                check_stack(l, 1);
                lua_pushboolean(l, (line == b"t") as c_int);
            }
        }
        b',' => {
            if lua {
                check_stack(l, 3);
                lua_newtable(l);
                push_bytes(l, b"double");
                lua_pushnumber(l, parse_f64(line));
                lua_settable(l, -3);
            }
        }
        b'(' => {
            if lua {
                check_stack(l, 3);
                lua_newtable(l);
                push_bytes(l, b"big_number");
                push_bytes(l, line);
                lua_settable(l, -3);
            }
        }
        _ => {
            if lua {
                lua_pushnil(l);
            }
        }
    }
}

/// `luaPushErrorBuff`: pushes `{err="CODE message"}`. A text starting with
/// '-' carries its own code up to the first space ("-WRONGTYPE ..."), any
/// other gets "ERR"; trailing CR/LF are trimmed.
pub(crate) unsafe fn push_error(l: State, text: &[u8]) {
    let (code, msg): (&[u8], &[u8]) = if let Some(rest) = text.strip_prefix(b"-") {
        match rest.iter().position(|&c| c == b' ') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (b"ERR", rest),
        }
    } else {
        (b"ERR", text)
    };
    // sdstrim(msg, "\r\n") trims both ends.
    let is_crlf = |c: &u8| *c == b'\r' || *c == b'\n';
    let start = msg.iter().position(|c| !is_crlf(c)).unwrap_or(msg.len());
    let end = msg
        .iter()
        .rposition(|c| !is_crlf(c))
        .map_or(start, |i| i + 1);
    let msg = &msg[start..end.max(start)];
    // The message is built by C string functions: it stops at a NUL.
    let cut = |s: &[u8]| -> usize { s.iter().position(|&c| c == 0).unwrap_or(s.len()) };
    let mut fin = Vec::with_capacity(code.len() + msg.len() + 1);
    fin.extend_from_slice(&code[..cut(code)]);
    fin.push(b' ');
    fin.extend_from_slice(msg);
    let fin_len = cut(&fin);
    lua_newtable(l);
    push_bytes(l, b"err");
    push_bytes(l, &fin[..fin_len]);
    lua_settable(l, -3);
}

/// Field `name` of the table at `idx` (raw), pushed.
unsafe fn rawfield(l: State, idx: c_int, name: &CStr) -> c_int {
    lua_pushstring(l, name.as_ptr());
    lua_rawget(l, if idx < 0 { idx - 1 } else { idx });
    lua_type(l, -1)
}

/// `(long long)n` as x86 computes it: out of range (and NaN) gives
/// `LLONG_MIN`.
pub(crate) fn double_to_ll(n: f64) -> i64 {
    if n.is_nan() || !(-9223372036854775808.0..9223372036854775808.0).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn map_crlf(mut s: Vec<u8>) -> Vec<u8> {
    for c in s.iter_mut() {
        if *c == b'\r' || *c == b'\n' {
            *c = b' ';
        }
    }
    s
}

/// `luaReplyToRedisReply`: the value at the top of the stack as a reply
/// (popped). `resp` is the script's protocol, which decides booleans.
pub(crate) unsafe fn to_value(l: State, resp: u8) -> Value {
    let t = lua_type(l, -1);
    if lua_checkstack(l, 4) == 0 {
        lua_pop(l, 1);
        return Value::Error(b"ERR reached lua stack limit".to_vec());
    }
    let v = match t {
        LUA_TSTRING => Value::Bulk(to_bytes(l, -1).unwrap_or_default().to_vec()),
        LUA_TBOOLEAN => {
            let b = lua_toboolean(l, -1) != 0;
            if resp == 2 {
                if b {
                    Value::Int(1)
                } else {
                    Value::Null
                }
            } else {
                Value::Bool(b)
            }
        }
        LUA_TNUMBER => Value::Int(double_to_ll(lua_tonumber(l, -1))),
        LUA_TTABLE => table_to_value(l, resp),
        _ => Value::Null,
    };
    lua_pop(l, 1);
    v
}

unsafe fn table_to_value(l: State, resp: u8) -> Value {
    if rawfield(l, -1, c"err") == LUA_TSTRING {
        lua_pop(l, 1);
        let info = error_info(l);
        let msg = map_crlf(info.msg.unwrap_or_default());
        return if info.counted {
            Value::CalledError(msg)
        } else {
            Value::Error(msg)
        };
    }
    lua_pop(l, 1);
    if rawfield(l, -1, c"ok") == LUA_TSTRING {
        let ok = map_crlf(to_cstr_bytes(l, -1).unwrap_or_default().to_vec());
        lua_pop(l, 1);
        return Value::Status(ok);
    }
    lua_pop(l, 1);
    if rawfield(l, -1, c"double") == LUA_TNUMBER {
        let d = lua_tonumber(l, -1);
        lua_pop(l, 1);
        return Value::Double(d);
    }
    lua_pop(l, 1);
    if rawfield(l, -1, c"big_number") == LUA_TSTRING {
        let n = map_crlf(to_bytes(l, -1).unwrap_or_default().to_vec());
        lua_pop(l, 1);
        return Value::BigNumber(n);
    }
    lua_pop(l, 1);
    if rawfield(l, -1, c"verbatim_string") == LUA_TTABLE {
        if rawfield(l, -1, c"format") == LUA_TSTRING {
            let format = to_cstr_bytes(l, -1).unwrap_or_default().to_vec();
            if rawfield(l, -2, c"string") == LUA_TSTRING {
                let text = to_bytes(l, -1).unwrap_or_default().to_vec();
                lua_pop(l, 3);
                return Value::Verbatim(format, text);
            }
            lua_pop(l, 1);
        }
        lua_pop(l, 1);
    }
    lua_pop(l, 1);
    if rawfield(l, -1, c"map") == LUA_TTABLE {
        let mut pairs = Vec::new();
        lua_pushnil(l);
        while lua_next(l, -2) != 0 {
            lua_pushvalue(l, -2);
            let k = to_value(l, resp);
            let v = to_value(l, resp);
            pairs.push((k, v));
        }
        lua_pop(l, 1);
        return Value::Map(pairs);
    }
    lua_pop(l, 1);
    if rawfield(l, -1, c"set") == LUA_TTABLE {
        let mut items = Vec::new();
        lua_pushnil(l);
        while lua_next(l, -2) != 0 {
            lua_pop(l, 1);
            lua_pushvalue(l, -1);
            items.push(to_value(l, resp));
        }
        lua_pop(l, 1);
        return Value::Set(items);
    }
    lua_pop(l, 1);
    let mut items = Vec::new();
    let mut j = 1;
    loop {
        lua_rawgeti(l, -1, j);
        j += 1;
        if lua_type(l, -1) == LUA_TNIL {
            lua_pop(l, 1);
            break;
        }
        items.push(to_value(l, resp));
    }
    Value::Array(items)
}

/// What `luaExtractErrorInformation` reads from an error table.
pub(crate) struct ErrorInfo {
    /// `None` when the table has no string `err`.
    pub msg: Option<Vec<u8>>,
    pub source: Option<Vec<u8>>,
    pub line: Option<Vec<u8>>,
    /// `ignore_error_stats_update` is true: the error came from a command
    /// the script called (see [`crate::Value::CalledError`]).
    pub counted: bool,
}

/// `luaExtractErrorInformation` on the value at the top of the stack.
pub(crate) unsafe fn error_info(l: State) -> ErrorInfo {
    let mut info = ErrorInfo {
        msg: None,
        source: None,
        line: None,
        counted: false,
    };
    if lua_isstring(l, -1) != 0 {
        let mut msg = b"ERR ".to_vec();
        msg.extend_from_slice(to_cstr_bytes(l, -1).unwrap_or_default());
        info.msg = Some(msg);
        return info;
    }
    if lua_type(l, -1) != LUA_TTABLE {
        return info;
    }
    lua_getfield(l, -1, c"err".as_ptr());
    if lua_isstring(l, -1) != 0 {
        info.msg = Some(to_cstr_bytes(l, -1).unwrap_or_default().to_vec());
    }
    lua_pop(l, 1);
    lua_getfield(l, -1, c"source".as_ptr());
    if lua_isstring(l, -1) != 0 {
        info.source = Some(to_cstr_bytes(l, -1).unwrap_or_default().to_vec());
    }
    lua_pop(l, 1);
    lua_getfield(l, -1, c"line".as_ptr());
    if lua_isstring(l, -1) != 0 {
        info.line = Some(to_cstr_bytes(l, -1).unwrap_or_default().to_vec());
    }
    lua_pop(l, 1);
    lua_getfield(l, -1, c"ignore_error_stats_update".as_ptr());
    info.counted = lua_type(l, -1) == LUA_TBOOLEAN && lua_toboolean(l, -1) != 0;
    lua_pop(l, 1);
    info
}
