//! The `cjson` library redis loads (Lua CJSON 2.1.0, `lua_cjson.c`, with
//! redis's changes): `encode`, `decode`, `null`, the configuration
//! functions and `new`.
//!
//! What scripts depend on is reproduced exactly: numbers are written with
//! `%.14g` (so `1e15` and `0.1` read as C prints them), an empty table
//! encodes as `{}`, a table is an array when its keys are positive integers
//! and not "excessively sparse" (more than twice as many slots as items past
//! index 10 is an error unless `encode_sparse_array(true)`), `/` is escaped,
//! decoded numbers are doubles (`strtod`, so hex, `inf` and `nan` are
//! accepted by default), JSON `null` is the lightuserdata `cjson.null`, and
//! errors read "Expected value but found invalid token at character 1". The
//! configuration lives in a userdata shared by the functions of one `cjson`
//! table, so a setting a script changes stays for the interpreter's life, as
//! in redis.

use std::ffi::{c_char, c_int, CStr};

use crate::lua::*;

#[derive(Clone, Copy)]
struct Config {
    encode_sparse_convert: c_int,
    encode_sparse_ratio: c_int,
    encode_sparse_safe: c_int,
    encode_max_depth: c_int,
    encode_invalid_numbers: c_int,
    encode_number_precision: c_int,
    encode_keep_buffer: c_int,
    decode_invalid_numbers: c_int,
    decode_max_depth: c_int,
}

const DEFAULT: Config = Config {
    encode_sparse_convert: 0,
    encode_sparse_ratio: 2,
    encode_sparse_safe: 10,
    encode_max_depth: 1000,
    encode_invalid_numbers: 0,
    encode_number_precision: 14,
    encode_keep_buffer: 1,
    decode_invalid_numbers: 1,
    decode_max_depth: 1000,
};

unsafe fn config<'a>(l: State) -> &'a mut Config {
    let cfg = lua_touserdata(l, lua_upvalueindex(1)) as *mut Config;
    if cfg.is_null() {
        raise(l, "BUG: Unable to fetch CJSON configuration");
    }
    &mut *cfg
}

unsafe fn arg_init<'a>(l: State, args: c_int) -> &'a mut Config {
    if lua_gettop(l) > args {
        arg_error(l, args + 1, c"found too many arguments");
    }
    while lua_gettop(l) < args {
        lua_pushnil(l);
    }
    config(l)
}

unsafe fn integer_option(l: State, idx: c_int, setting: &mut c_int, min: c_int, max: c_int) {
    if lua_isnil(l, idx) == 0 {
        let value = luaL_checkinteger(l, idx) as c_int;
        if !(min <= value && value <= max) {
            let msg = format!("expected integer between {min} and {max}\0");
            let cmsg = CStr::from_bytes_with_nul(msg.as_bytes()).unwrap_or(c"");
            lua_pushstring(l, cmsg.as_ptr());
            drop(msg);
            let m = lua_tostring(l, -1);
            luaL_argerror(l, 1, m);
        }
        *setting = value;
    }
    lua_pushinteger(l, *setting as _);
}

unsafe fn enum_option(
    l: State,
    idx: c_int,
    setting: &mut c_int,
    options: &[&CStr],
    bool_true: c_int,
) {
    const BOOL: [&CStr; 2] = [c"off", c"on"];
    let (options, bool_true) = if options.is_empty() {
        (&BOOL[..], 1)
    } else {
        (options, bool_true)
    };
    if lua_isnil(l, idx) == 0 {
        if bool_true != 0 && lua_isboolean(l, idx) != 0 {
            *setting = lua_toboolean(l, idx) * bool_true;
        } else {
            let mut list: [*const c_char; 4] = [std::ptr::null(); 4];
            for (i, o) in options.iter().enumerate() {
                list[i] = o.as_ptr();
            }
            *setting = luaL_checkoption(l, idx, std::ptr::null(), list.as_ptr());
        }
    }
    if bool_true != 0 && (*setting == 0 || *setting == bool_true) {
        lua_pushboolean(l, *setting);
    } else {
        lua_pushstring(l, options[*setting as usize].as_ptr());
    }
}

unsafe extern "C-unwind" fn cfg_encode_sparse_array(l: State) -> c_int {
    let cfg = arg_init(l, 3);
    enum_option(l, 1, &mut cfg.encode_sparse_convert, &[], 1);
    integer_option(l, 2, &mut cfg.encode_sparse_ratio, 0, c_int::MAX);
    integer_option(l, 3, &mut cfg.encode_sparse_safe, 0, c_int::MAX);
    3
}

unsafe extern "C-unwind" fn cfg_encode_max_depth(l: State) -> c_int {
    let cfg = arg_init(l, 1);
    integer_option(l, 1, &mut cfg.encode_max_depth, 1, c_int::MAX);
    1
}

unsafe extern "C-unwind" fn cfg_decode_max_depth(l: State) -> c_int {
    let cfg = arg_init(l, 1);
    integer_option(l, 1, &mut cfg.decode_max_depth, 1, c_int::MAX);
    1
}

unsafe extern "C-unwind" fn cfg_encode_number_precision(l: State) -> c_int {
    let cfg = arg_init(l, 1);
    integer_option(l, 1, &mut cfg.encode_number_precision, 1, 14);
    1
}

unsafe extern "C-unwind" fn cfg_encode_keep_buffer(l: State) -> c_int {
    let cfg = arg_init(l, 1);
    enum_option(l, 1, &mut cfg.encode_keep_buffer, &[], 1);
    1
}

unsafe extern "C-unwind" fn cfg_encode_invalid_numbers(l: State) -> c_int {
    let cfg = arg_init(l, 1);
    enum_option(
        l,
        1,
        &mut cfg.encode_invalid_numbers,
        &[c"off", c"on", c"null"],
        1,
    );
    1
}

unsafe extern "C-unwind" fn cfg_decode_invalid_numbers(l: State) -> c_int {
    let cfg = arg_init(l, 1);
    enum_option(l, 1, &mut cfg.decode_invalid_numbers, &[], 1);
    1
}

// ===== Encoding =====

fn escape(c: u8) -> Option<&'static [u8]> {
    const CTRL: [&[u8]; 32] = [
        b"\\u0000", b"\\u0001", b"\\u0002", b"\\u0003", b"\\u0004", b"\\u0005", b"\\u0006",
        b"\\u0007", b"\\b", b"\\t", b"\\n", b"\\u000b", b"\\f", b"\\r", b"\\u000e", b"\\u000f",
        b"\\u0010", b"\\u0011", b"\\u0012", b"\\u0013", b"\\u0014", b"\\u0015", b"\\u0016",
        b"\\u0017", b"\\u0018", b"\\u0019", b"\\u001a", b"\\u001b", b"\\u001c", b"\\u001d",
        b"\\u001e", b"\\u001f",
    ];
    match c {
        0..=31 => Some(CTRL[c as usize]),
        b'"' => Some(b"\\\""),
        b'/' => Some(b"\\/"),
        b'\\' => Some(b"\\\\"),
        127 => Some(b"\\u007f"),
        _ => None,
    }
}

unsafe fn exception(l: State, idx: c_int, reason: &str) -> String {
    let tname = CStr::from_ptr(lua_typename(l, lua_type(l, idx)));
    format!("Cannot serialise {}: {reason}", tname.to_string_lossy())
}

unsafe fn append_string(l: State, json: &mut Vec<u8>, idx: c_int) {
    let s = to_bytes(l, idx).unwrap_or_default();
    json.reserve(s.len() + 2);
    json.push(b'"');
    for &c in s {
        match escape(c) {
            Some(e) => json.extend_from_slice(e),
            None => json.push(c),
        }
    }
    json.push(b'"');
}

/// `lua_array_length`: the array's length, or -1 for an object.
unsafe fn array_length(l: State, cfg: &Config) -> Result<c_int, String> {
    let (mut max, mut items) = (0 as c_int, 0 as c_int);
    lua_pushnil(l);
    while lua_next(l, -2) != 0 {
        if lua_type(l, -2) == LUA_TNUMBER {
            let k = lua_tonumber(l, -2);
            if k != 0.0 && k.floor() == k && k >= 1.0 {
                if k > max as f64 {
                    max = k as c_int;
                }
                items += 1;
                lua_pop(l, 1);
                continue;
            }
        }
        lua_pop(l, 2);
        return Ok(-1);
    }
    if cfg.encode_sparse_ratio > 0
        && max > items.wrapping_mul(cfg.encode_sparse_ratio)
        && max > cfg.encode_sparse_safe
    {
        if cfg.encode_sparse_convert == 0 {
            return Err(exception(l, -1, "excessively sparse array"));
        }
        return Ok(-1);
    }
    Ok(max)
}

unsafe fn append_number(
    l: State,
    cfg: &Config,
    json: &mut Vec<u8>,
    idx: c_int,
) -> Result<(), String> {
    let num = lua_tonumber(l, idx);
    if cfg.encode_invalid_numbers == 0 {
        if num.is_infinite() || num.is_nan() {
            return Err(exception(l, idx, "must not be NaN or Inf"));
        }
    } else if cfg.encode_invalid_numbers == 1 {
        if num.is_nan() {
            json.extend_from_slice(b"nan");
            return Ok(());
        }
    } else if num.is_infinite() || num.is_nan() {
        json.extend_from_slice(b"null");
        return Ok(());
    }
    json.extend_from_slice(&fmt_g(num, cfg.encode_number_precision));
    Ok(())
}

unsafe fn append_data(
    l: State,
    cfg: &Config,
    depth: c_int,
    json: &mut Vec<u8>,
) -> Result<(), String> {
    if crate::output_too_long(json.len()) {
        return Err("not enough memory".into());
    }
    match lua_type(l, -1) {
        LUA_TSTRING => append_string(l, json, -1),
        LUA_TNUMBER => append_number(l, cfg, json, -1)?,
        LUA_TBOOLEAN => json.extend_from_slice(if lua_toboolean(l, -1) != 0 {
            b"true"
        } else {
            b"false"
        }),
        LUA_TTABLE => {
            let depth = depth + 1;
            if !(depth <= cfg.encode_max_depth && lua_checkstack(l, 3) != 0) {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            let len = array_length(l, cfg)?;
            if len > 0 {
                json.push(b'[');
                for i in 1..=len {
                    if i > 1 {
                        json.push(b',');
                    }
                    lua_rawgeti(l, -1, i as _);
                    append_data(l, cfg, depth, json)?;
                    lua_pop(l, 1);
                }
                json.push(b']');
            } else {
                json.push(b'{');
                lua_pushnil(l);
                let mut comma = false;
                while lua_next(l, -2) != 0 {
                    if comma {
                        json.push(b',');
                    } else {
                        comma = true;
                    }
                    match lua_type(l, -2) {
                        LUA_TNUMBER => {
                            json.push(b'"');
                            append_number(l, cfg, json, -2)?;
                            json.extend_from_slice(b"\":");
                        }
                        LUA_TSTRING => {
                            append_string(l, json, -2);
                            json.push(b':');
                        }
                        _ => {
                            return Err(exception(l, -2, "table key must be a number or string"));
                        }
                    }
                    append_data(l, cfg, depth, json)?;
                    lua_pop(l, 1);
                }
                json.push(b'}');
            }
        }
        LUA_TNIL => json.extend_from_slice(b"null"),
        LUA_TLIGHTUSERDATA if lua_touserdata(l, -1).is_null() => json.extend_from_slice(b"null"),
        _ => return Err(exception(l, -1, "type not supported")),
    }
    Ok(())
}

unsafe extern "C-unwind" fn encode(l: State) -> c_int {
    let cfg = *config(l);
    if lua_gettop(l) != 1 {
        arg_error(l, 1, c"expected 1 argument");
    }
    let buf = push_buffer(l) as *mut Vec<u8>;
    lua_insert(l, 1);
    let result = append_data(l, &cfg, 0, &mut *buf);
    if let Err(msg) = result {
        raise(l, msg);
    }
    push_bytes(l, &*buf);
    1
}

// ===== Decoding =====

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Whitespace,
    Error,
    Unknown,
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Number => "T_NUMBER",
            Tok::Boolean => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Whitespace => "T_WHITESPACE",
            Tok::Error => "T_ERROR",
            Tok::Unknown => "T_UNKNOWN",
        }
    }

    fn of(c: u8) -> Tok {
        match c {
            b'{' => Tok::ObjBegin,
            b'}' => Tok::ObjEnd,
            b'[' => Tok::ArrBegin,
            b']' => Tok::ArrEnd,
            b',' => Tok::Comma,
            b':' => Tok::Colon,
            0 => Tok::End,
            b' ' | b'\t' | b'\n' | b'\r' => Tok::Whitespace,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9' => {
                Tok::Unknown
            }
            _ => Tok::Error,
        }
    }
}

struct Token {
    kind: Tok,
    index: usize,
    error: &'static str,
    number: f64,
    boolean: bool,
}

struct Parser<'a> {
    /// The text with its terminating NUL (Lua strings always have one).
    data: &'a [u8],
    ptr: usize,
    tmp: Vec<u8>,
    cfg: Config,
    depth: c_int,
}

fn hexdigit(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        // Reads past the NUL never happen in C because every check stops at
        // it; here an index past the end reads as NUL too.
        self.data.get(i).copied().unwrap_or(0)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            v = (v << 4) + hexdigit(self.at(at + i))?;
        }
        Some(v)
    }

    fn unicode_escape(&mut self) -> bool {
        let Some(mut cp) = self.hex4(self.ptr + 2) else {
            return false;
        };
        let mut escape_len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.ptr + 6) != b'\\' || self.at(self.ptr + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.ptr + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            escape_len = 12;
        }
        let mut utf8 = [0u8; 4];
        let len = if cp <= 0x7F {
            utf8[0] = cp as u8;
            1
        } else if cp <= 0x7FF {
            utf8[0] = ((cp >> 6) | 0xC0) as u8;
            utf8[1] = ((cp & 0x3F) | 0x80) as u8;
            2
        } else if cp <= 0xFFFF {
            utf8[0] = ((cp >> 12) | 0xE0) as u8;
            utf8[1] = (((cp >> 6) & 0x3F) | 0x80) as u8;
            utf8[2] = ((cp & 0x3F) | 0x80) as u8;
            3
        } else {
            utf8[0] = ((cp >> 18) | 0xF0) as u8;
            utf8[1] = (((cp >> 12) & 0x3F) | 0x80) as u8;
            utf8[2] = (((cp >> 6) & 0x3F) | 0x80) as u8;
            utf8[3] = ((cp & 0x3F) | 0x80) as u8;
            4
        };
        self.tmp.extend_from_slice(&utf8[..len]);
        self.ptr += escape_len;
        true
    }

    fn error(&self, token: &mut Token, what: &'static str) {
        token.kind = Tok::Error;
        token.index = self.ptr;
        token.error = what;
    }

    fn string_token(&mut self, token: &mut Token) {
        self.ptr += 1;
        self.tmp.clear();
        loop {
            let mut ch = self.at(self.ptr);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                self.error(token, "unexpected end of string");
                return;
            }
            if ch == b'\\' {
                ch = match self.at(self.ptr + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 12,
                    b'r' => b'\r',
                    b'u' => b'u',
                    _ => 0,
                };
                if ch == b'u' {
                    if self.unicode_escape() {
                        continue;
                    }
                    self.error(token, "invalid unicode escape code");
                    return;
                }
                if ch == 0 {
                    self.error(token, "invalid escape code");
                    return;
                }
                self.ptr += 1;
            }
            self.tmp.push(ch);
            self.ptr += 1;
        }
        self.ptr += 1;
        token.kind = Tok::Str;
    }

    fn is_invalid_number(&self) -> bool {
        let mut p = self.ptr;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        if self.at(p) == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        } else if self.at(p) <= b'9' {
            return false;
        }
        let word = |w: &[u8]| (0..3).all(|i| self.at(p + i).eq_ignore_ascii_case(&w[i]));
        word(b"inf") || word(b"nan")
    }

    unsafe fn number_token(&mut self, token: &mut Token) {
        token.kind = Tok::Number;
        let start = self.data.as_ptr().add(self.ptr) as *const c_char;
        let mut end: *mut c_char = std::ptr::null_mut();
        token.number = libc::strtod(start, &mut end);
        if std::ptr::eq(end, start) {
            self.error(token, "invalid number");
        } else {
            self.ptr += end as usize - start as usize;
        }
    }

    fn starts_with(&self, w: &[u8]) -> bool {
        w.iter()
            .enumerate()
            .all(|(i, &c)| self.at(self.ptr + i) == c)
    }

    unsafe fn next_token(&mut self) -> Token {
        let mut token = Token {
            kind: Tok::Error,
            index: 0,
            error: "",
            number: 0.0,
            boolean: false,
        };
        let mut ch;
        loop {
            ch = self.at(self.ptr);
            token.kind = Tok::of(ch);
            if token.kind != Tok::Whitespace {
                break;
            }
            self.ptr += 1;
        }
        token.index = self.ptr;
        match token.kind {
            Tok::Error => {
                self.error(&mut token, "invalid token");
                return token;
            }
            Tok::End => return token,
            Tok::Unknown => {}
            _ => {
                self.ptr += 1;
                return token;
            }
        }
        if ch == b'"' {
            self.string_token(&mut token);
        } else if ch == b'-' || ch.is_ascii_digit() {
            if self.cfg.decode_invalid_numbers == 0 && self.is_invalid_number() {
                self.error(&mut token, "invalid number");
            } else {
                self.number_token(&mut token);
            }
        } else if self.starts_with(b"true") {
            token.kind = Tok::Boolean;
            token.boolean = true;
            self.ptr += 4;
        } else if self.starts_with(b"false") {
            token.kind = Tok::Boolean;
            token.boolean = false;
            self.ptr += 5;
        } else if self.starts_with(b"null") {
            token.kind = Tok::Null;
            self.ptr += 4;
        } else if self.cfg.decode_invalid_numbers != 0 && self.is_invalid_number() {
            self.number_token(&mut token);
        } else {
            self.error(&mut token, "invalid token");
        }
        token
    }

    fn parse_error(&self, expected: &str, token: &Token) -> String {
        let found = if token.kind == Tok::Error {
            token.error
        } else {
            token.kind.name()
        };
        format!(
            "Expected {expected} but found {found} at character {}",
            token.index as c_int + 1
        )
    }

    unsafe fn descend(&mut self, l: State, slots: c_int) -> Result<(), String> {
        self.depth += 1;
        if self.depth <= self.cfg.decode_max_depth && lua_checkstack(l, slots) != 0 {
            return Ok(());
        }
        Err(format!(
            "Found too many nested data structures ({}) at character {}",
            self.depth, self.ptr as c_int
        ))
    }

    unsafe fn object(&mut self, l: State) -> Result<(), String> {
        self.descend(l, 3)?;
        lua_newtable(l);
        let mut token = self.next_token();
        if token.kind == Tok::ObjEnd {
            self.depth -= 1;
            return Ok(());
        }
        loop {
            if token.kind != Tok::Str {
                return Err(self.parse_error("object key string", &token));
            }
            push_bytes(l, &self.tmp);
            token = self.next_token();
            if token.kind != Tok::Colon {
                return Err(self.parse_error("colon", &token));
            }
            token = self.next_token();
            self.value(l, &token)?;
            lua_rawset(l, -3);
            token = self.next_token();
            if token.kind == Tok::ObjEnd {
                self.depth -= 1;
                return Ok(());
            }
            if token.kind != Tok::Comma {
                return Err(self.parse_error("comma or object end", &token));
            }
            token = self.next_token();
        }
    }

    unsafe fn array(&mut self, l: State) -> Result<(), String> {
        self.descend(l, 2)?;
        lua_newtable(l);
        let mut token = self.next_token();
        if token.kind == Tok::ArrEnd {
            self.depth -= 1;
            return Ok(());
        }
        let mut i = 1;
        loop {
            self.value(l, &token)?;
            lua_rawseti(l, -2, i as _);
            i += 1;
            token = self.next_token();
            if token.kind == Tok::ArrEnd {
                self.depth -= 1;
                return Ok(());
            }
            if token.kind != Tok::Comma {
                return Err(self.parse_error("comma or array end", &token));
            }
            token = self.next_token();
        }
    }

    unsafe fn value(&mut self, l: State, token: &Token) -> Result<(), String> {
        match token.kind {
            Tok::Str => push_bytes(l, &self.tmp),
            Tok::Number => lua_pushnumber(l, token.number),
            Tok::Boolean => lua_pushboolean(l, token.boolean as c_int),
            Tok::ObjBegin => self.object(l)?,
            Tok::ArrBegin => self.array(l)?,
            Tok::Null => lua_pushlightuserdata(l, std::ptr::null_mut()),
            _ => return Err(self.parse_error("value", token)),
        }
        Ok(())
    }
}

unsafe fn decode_into(l: State, cfg: Config) -> Result<(), String> {
    let mut len = 0usize;
    let p = luaL_checklstring(l, 1, &mut len) as *const u8;
    // Lua keeps a NUL after every string's bytes; the parser stops there.
    let data = std::slice::from_raw_parts(p, len + 1);
    if len >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err("JSON parser does not support UTF-16 or UTF-32".into());
    }
    let mut parser = Parser {
        data,
        ptr: 0,
        tmp: Vec::new(),
        cfg,
        depth: 0,
    };
    let token = parser.next_token();
    parser.value(l, &token)?;
    let token = parser.next_token();
    if token.kind != Tok::End {
        return Err(parser.parse_error("the end", &token));
    }
    Ok(())
}

unsafe extern "C-unwind" fn decode(l: State) -> c_int {
    if lua_gettop(l) != 1 {
        arg_error(l, 1, c"expected 1 argument");
    }
    let cfg = *config(l);
    let result = decode_into(l, cfg);
    if let Err(msg) = result {
        raise(l, msg);
    }
    1
}

unsafe extern "C-unwind" fn new(l: State) -> c_int {
    create(l);
    1
}

/// `lua_cjson_new`: pushes a `cjson` table with its own configuration.
unsafe fn create(l: State) {
    let funcs: [(&CStr, lua_CFunction); 10] = [
        (c"encode", encode),
        (c"decode", decode),
        (c"encode_sparse_array", cfg_encode_sparse_array),
        (c"encode_max_depth", cfg_encode_max_depth),
        (c"decode_max_depth", cfg_decode_max_depth),
        (c"encode_number_precision", cfg_encode_number_precision),
        (c"encode_keep_buffer", cfg_encode_keep_buffer),
        (c"encode_invalid_numbers", cfg_encode_invalid_numbers),
        (c"decode_invalid_numbers", cfg_decode_invalid_numbers),
        (c"new", new),
    ];
    lua_newtable(l);
    let cfg = lua_newuserdata(l, std::mem::size_of::<Config>()) as *mut Config;
    std::ptr::write(cfg, DEFAULT);
    // The C library's metatable (a __gc freeing its buffer) has nothing to
    // free here, but is kept so the userdata looks the same.
    lua_newtable(l);
    lua_setmetatable(l, -2);
    for (name, f) in funcs {
        lua_pushvalue(l, -1);
        lua_pushcclosure(l, f, 1);
        lua_setfield(l, -3, name.as_ptr());
    }
    lua_pop(l, 1);
    lua_pushlightuserdata(l, std::ptr::null_mut());
    lua_setfield(l, -2, c"null".as_ptr());
    push_bytes(l, b"cjson");
    lua_setfield(l, -2, c"_NAME".as_ptr());
    push_bytes(l, b"2.1.0");
    lua_setfield(l, -2, c"_VERSION".as_ptr());
}

/// `luaopen_cjson`: leaves the `cjson` table on the stack.
pub(crate) unsafe extern "C-unwind" fn open(l: State) -> c_int {
    create(l);
    1
}
