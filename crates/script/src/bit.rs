//! The `bit` library redis loads (Lua BitOp 1.0.2, `lua_bit.c`): 32-bit
//! operations on Lua numbers. An argument is reduced to 32 bits the way
//! BitOp does it, by adding 2^52+2^51 and taking the low word of the double,
//! so fractions round to nearest-even and values wrap modulo 2^32; results
//! are signed 32-bit numbers.

use std::ffi::c_int;

use crate::lua::*;

/// BitOp's `barg`: argument `idx` as 32 bits; a non-number is a type error
/// (only noticed when its bits come out as zero, as in Lua 5.1's BitOp).
unsafe fn barg(l: State, idx: c_int) -> u32 {
    let n = lua_tonumber(l, idx) + 6755399441055744.0;
    let b = n.to_bits() as u32;
    if b == 0 && lua_isnumber(l, idx) == 0 {
        luaL_typerror(l, idx, c"number".as_ptr());
    }
    b
}

unsafe fn bret(l: State, b: u32) -> c_int {
    lua_pushnumber(l, b as i32 as f64);
    1
}

unsafe extern "C-unwind" fn tobit(l: State) -> c_int {
    bret(l, barg(l, 1))
}

unsafe extern "C-unwind" fn bnot(l: State) -> c_int {
    bret(l, !barg(l, 1))
}

unsafe fn fold(l: State, op: fn(u32, u32) -> u32) -> c_int {
    let mut b = barg(l, 1);
    let mut i = lua_gettop(l);
    while i > 1 {
        b = op(b, barg(l, i));
        i -= 1;
    }
    bret(l, b)
}

unsafe extern "C-unwind" fn band(l: State) -> c_int {
    fold(l, |a, b| a & b)
}

unsafe extern "C-unwind" fn bor(l: State) -> c_int {
    fold(l, |a, b| a | b)
}

unsafe extern "C-unwind" fn bxor(l: State) -> c_int {
    fold(l, |a, b| a ^ b)
}

unsafe fn shift(l: State, op: fn(u32, u32) -> u32) -> c_int {
    let b = barg(l, 1);
    let n = barg(l, 2) & 31;
    bret(l, op(b, n))
}

unsafe extern "C-unwind" fn lshift(l: State) -> c_int {
    shift(l, |b, n| b << n)
}

unsafe extern "C-unwind" fn rshift(l: State) -> c_int {
    shift(l, |b, n| b >> n)
}

unsafe extern "C-unwind" fn arshift(l: State) -> c_int {
    shift(l, |b, n| ((b as i32) >> n) as u32)
}

unsafe extern "C-unwind" fn rol(l: State) -> c_int {
    shift(l, |b, n| b.rotate_left(n))
}

unsafe extern "C-unwind" fn ror(l: State) -> c_int {
    shift(l, |b, n| b.rotate_right(n))
}

unsafe extern "C-unwind" fn bswap(l: State) -> c_int {
    bret(l, barg(l, 1).swap_bytes())
}

unsafe extern "C-unwind" fn tohex(l: State) -> c_int {
    let mut b = barg(l, 1);
    let mut n: i32 = if lua_isnone(l, 2) != 0 {
        8
    } else {
        barg(l, 2) as i32
    };
    let mut digits: &[u8; 16] = b"0123456789abcdef";
    if n < 0 {
        n = n.wrapping_neg();
        digits = b"0123456789ABCDEF";
    }
    // BitOp's `n = -n` leaves i32::MIN negative, and then prints nothing.
    let n = n.clamp(0, 8) as usize;
    let mut buf = [0u8; 8];
    for i in (0..n).rev() {
        buf[i] = digits[(b & 15) as usize];
        b >>= 4;
    }
    push_bytes(l, &buf[..n]);
    1
}

/// `luaopen_bit`: leaves the `bit` table on the stack.
pub(crate) unsafe extern "C-unwind" fn open(l: State) -> c_int {
    lua_newtable(l);
    set_funcs(
        l,
        &[
            (c"tobit", tobit),
            (c"bnot", bnot),
            (c"band", band),
            (c"bor", bor),
            (c"bxor", bxor),
            (c"lshift", lshift),
            (c"rshift", rshift),
            (c"arshift", arshift),
            (c"rol", rol),
            (c"ror", ror),
            (c"bswap", bswap),
            (c"tohex", tohex),
        ],
    );
    1
}
