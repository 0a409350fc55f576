//! The `struct` library redis loads (Roberto Ierusalimschy's `lua_struct.c`,
//! with redis's changes): `struct.pack`, `struct.unpack` and `struct.size`
//! over a format string of options. Integers are C `long` (64 bits), `i`/`I`
//! take a size of up to 32 bytes, native order is little-endian and the
//! default alignment is 1 (`!` sets it, `!` alone to 8).

use std::ffi::c_int;

use crate::lua::*;

const MAXINTSIZE: usize = 32;
/// `MAXALIGN` on x86-64: the larger of a double's padding and `sizeof(int)`.
const MAXALIGN: usize = 8;

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Header {
    fn new() -> Header {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// A cursor over the format string (which, read as C reads it, ends at the
/// first NUL).
struct Fmt<'a> {
    s: &'a [u8],
    i: usize,
}

impl Fmt<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.s.get(self.i)?;
        self.i += 1;
        Some(c)
    }
}

/// `getnum`: a decimal number at the cursor, or `df`.
unsafe fn getnum(l: State, f: &mut Fmt, df: usize) -> usize {
    match f.s.get(f.i) {
        Some(c) if c.is_ascii_digit() => {}
        _ => return df,
    }
    let mut a: i32 = 0;
    while let Some(&c) = f.s.get(f.i) {
        if !c.is_ascii_digit() {
            break;
        }
        let d = (c - b'0') as i32;
        if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
            raise(l, "integral size overflow");
        }
        a = a * 10 + d;
        f.i += 1;
    }
    a as usize
}

unsafe fn optsize(l: State, opt: u8, f: &mut Fmt) -> usize {
    match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'x' => 1,
        b'c' => getnum(l, f, 1),
        b'i' | b'I' => {
            let sz = getnum(l, f, 4);
            if sz > MAXINTSIZE {
                raise(
                    l,
                    format!("integral size {sz} is larger than limit of {MAXINTSIZE}"),
                );
            }
            sz
        }
        _ => 0,
    }
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & (size - 1))) & (size - 1)
}

unsafe fn controloptions(l: State, opt: u8, f: &mut Fmt, h: &mut Header) {
    match opt {
        b' ' => {}
        b'>' => h.endian = Endian::Big,
        b'<' => h.endian = Endian::Little,
        b'!' => {
            let a = getnum(l, f, MAXALIGN);
            if a == 0 || a & (a - 1) != 0 {
                raise(l, format!("alignment {a} is not a power of 2"));
            }
            h.align = a;
        }
        _ => {
            // lua_pushfstring's %c; the message stays on the stack, as in C.
            let msg = lua_pushfstring(l, c"invalid format option '%c'".as_ptr(), opt as c_int);
            luaL_argerror(l, 1, msg);
        }
    }
}

unsafe fn fmt_arg<'a>(l: State) -> Fmt<'a> {
    luaL_checklstring(l, 1, std::ptr::null_mut());
    Fmt {
        s: to_cstr_bytes(l, 1).unwrap_or_default(),
        i: 0,
    }
}

unsafe extern "C-unwind" fn pack(l: State) -> c_int {
    let mut f = fmt_arg(l);
    let mut h = Header::new();
    let mut arg = 2;
    let mut total = 0usize;
    lua_pushnil(l);
    // Built in Lua's own buffer so that an error mid-way leaks nothing.
    let mut b: luaL_Buffer = std::mem::zeroed();
    luaL_buffinit(l, &mut b);
    while let Some(opt) = f.next() {
        let mut size = optsize(l, opt, &mut f);
        let toalign = gettoalign(total, &h, opt, size);
        total += toalign;
        for _ in 0..toalign {
            luaL_addchar(&mut b, 0);
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = luaL_checknumber(l, arg);
                arg += 1;
                let mut value: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let mut buff = [0u8; MAXINTSIZE];
                if h.endian == Endian::Little {
                    for byte in buff.iter_mut().take(size) {
                        *byte = value as u8;
                        value >>= 8;
                    }
                } else {
                    for i in (0..size).rev() {
                        buff[i] = value as u8;
                        value >>= 8;
                    }
                }
                luaL_addlstring(&mut b, buff.as_ptr() as *const _, size);
            }
            b'x' => luaL_addchar(&mut b, 0),
            b'f' => {
                let v = luaL_checknumber(l, arg) as f32;
                arg += 1;
                let bytes = match h.endian {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                };
                luaL_addlstring(&mut b, bytes.as_ptr() as *const _, size);
            }
            b'd' => {
                let v = luaL_checknumber(l, arg);
                arg += 1;
                let bytes = match h.endian {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                };
                luaL_addlstring(&mut b, bytes.as_ptr() as *const _, size);
            }
            b'c' | b's' => {
                let mut len = 0usize;
                let s = luaL_checklstring(l, arg, &mut len);
                arg += 1;
                if size == 0 {
                    size = len;
                }
                if len < size {
                    arg_error(l, arg, c"string too short");
                }
                luaL_addlstring(&mut b, s, size);
                if opt == b's' {
                    luaL_addchar(&mut b, 0);
                    size += 1;
                }
            }
            _ => controloptions(l, opt, &mut f, &mut h),
        }
        total += size;
    }
    luaL_pushresult(&mut b);
    1
}

fn getinteger(buff: &[u8], endian: Endian, signed: bool, size: usize) -> f64 {
    let mut v: u64 = 0;
    if endian == Endian::Big {
        for &c in &buff[..size] {
            v = (v << 8) | c as u64;
        }
    } else {
        for &c in buff[..size].iter().rev() {
            v = (v << 8) | c as u64;
        }
    }
    if !signed {
        v as f64
    } else {
        // C shifts by size*8-1 (taken modulo 64 on x86 past 8 bytes).
        let mask = u64::MAX.wrapping_shl((size * 8).wrapping_sub(1) as u32);
        if v & mask != 0 {
            v |= mask;
        }
        v as i64 as f64
    }
}

unsafe extern "C-unwind" fn unpack(l: State) -> c_int {
    let mut f = fmt_arg(l);
    let mut ld = 0usize;
    let data = luaL_checklstring(l, 2, &mut ld) as *const u8;
    let data = std::slice::from_raw_parts(data, ld);
    let pos = luaL_optinteger(l, 3, 1);
    if pos <= 0 {
        arg_error(l, 3, c"offset must be 1 or greater");
    }
    let mut pos = (pos - 1) as usize;
    let mut n = 0;
    let mut h = Header::new();
    while let Some(opt) = f.next() {
        let mut size = optsize(l, opt, &mut f);
        pos += gettoalign(pos, &h, opt, size);
        if !(size <= ld && pos <= ld - size) {
            arg_error(l, 2, c"data string too short");
        }
        luaL_checkstack(l, 2, c"too many results".as_ptr());
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                lua_pushnumber(l, getinteger(&data[pos..], h.endian, signed, size));
                n += 1;
            }
            b'x' => {}
            b'f' => {
                let mut w = [0u8; 4];
                w.copy_from_slice(&data[pos..pos + 4]);
                let v = match h.endian {
                    Endian::Little => f32::from_le_bytes(w),
                    Endian::Big => f32::from_be_bytes(w),
                };
                lua_pushnumber(l, v as f64);
                n += 1;
            }
            b'd' => {
                let mut w = [0u8; 8];
                w.copy_from_slice(&data[pos..pos + 8]);
                let v = match h.endian {
                    Endian::Little => f64::from_le_bytes(w),
                    Endian::Big => f64::from_be_bytes(w),
                };
                lua_pushnumber(l, v);
                n += 1;
            }
            b'c' => {
                if size == 0 {
                    if n == 0 || lua_isnumber(l, -1) == 0 {
                        raise(l, "format 'c0' needs a previous size");
                    }
                    size = lua_tonumber(l, -1) as usize;
                    lua_pop(l, 1);
                    n -= 1;
                    if !(size <= ld && pos <= ld - size) {
                        arg_error(l, 2, c"data string too short");
                    }
                }
                push_bytes(l, &data[pos..pos + size]);
                n += 1;
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&c| c == 0) else {
                    raise(l, "unfinished string in data");
                };
                size = e + 1;
                push_bytes(l, &data[pos..pos + e]);
                n += 1;
            }
            _ => controloptions(l, opt, &mut f, &mut h),
        }
        pos += size;
    }
    lua_pushinteger(l, (pos + 1) as _);
    n + 1
}

unsafe extern "C-unwind" fn size(l: State) -> c_int {
    let mut f = fmt_arg(l);
    let mut h = Header::new();
    let mut pos = 0usize;
    while let Some(opt) = f.next() {
        let size = optsize(l, opt, &mut f);
        pos += gettoalign(pos, &h, opt, size);
        if opt == b's' {
            arg_error(l, 1, c"option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            arg_error(l, 1, c"option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            controloptions(l, opt, &mut f, &mut h);
        }
        pos += size;
    }
    lua_pushinteger(l, pos as _);
    1
}

/// `luaopen_struct`: leaves the `struct` table on the stack.
pub(crate) unsafe extern "C-unwind" fn open(l: State) -> c_int {
    lua_newtable(l);
    set_funcs(l, &[(c"pack", pack), (c"unpack", unpack), (c"size", size)]);
    1
}
