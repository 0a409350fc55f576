//! LOLWUT: the computer art redis prints above its version.
//!
//! redis 7.0 has no art of its own: `LOLWUT` prints `Redis ver. 7.0.15`.
//! Asked for an older version (`LOLWUT VERSION 5` or `6`), it draws that
//! version's piece, and so does this module, ported from redis's
//! `lolwut.c`, `lolwut5.c` and `lolwut6.c` with the same parameters,
//! limits, arithmetic and signature lines:
//!
//! - **version 5**, *Schotter* (Georg Nees, 1968): a grid of squares
//!   (`squares-per-row` by `squares-per-col`, default 8 by 12) that turn
//!   and drift more the lower they are, drawn `columns` characters wide
//!   (default 66) in braille, each character a 2x4 block of pixels;
//! - **version 6**, a city skyline after the parallax backgrounds of 8-bit
//!   games: `columns` by `rows` (default 80 by 20) terminal cells in four
//!   grays, each cell an ANSI colour escape around a space.
//!
//! Both pieces are random in redis too (its `rand()`; here the thread's
//! generator), so only their shape is fixed: how many lines, how wide,
//! which characters, and the signature. Everything else about the
//! command is redis's, quirks included: `VERSION` is read only as the
//! first argument and only with a value after it, the version is taken
//! modulo 2^32 (`(unsigned int)ver`), the pieces' parameters are checked
//! as integers and then clamped, arguments they do not use are ignored,
//! and without a version of 5 or 6 every other argument is ignored.
//!
//! The one departure is memory: redis keeps a byte per pixel, and its
//! limits allow a Schotter canvas of 2000 by 399,204 pixels (`LOLWUT
//! VERSION 5 1000 1 200`), 800 MB. Pixels here take two bits, a quarter of
//! that; the reply itself (300 MB for that canvas) is the same size as
//! redis's.

use rand::Rng;
use respite_engine::View;

use crate::args::Args;
use crate::command::Ctx;
use crate::command::ReadCommand;
use crate::error::CommandError;
use crate::reply::Reply;

/// C's `RAND_MAX` with glibc: `rand()` answers `0..=RAND_MAX`.
const RAND_MAX: i32 = i32::MAX;

/// C's `rand()`, from the thread's generator.
fn c_rand(rng: &mut impl Rng) -> i32 {
    rng.random_range(0..=RAND_MAX)
}

/// A canvas of pixels, each 0 to 3 (`lwCanvas`): Schotter uses 0 and 1,
/// the skyline four grays. Drawing outside it does nothing, reading
/// outside it answers 0, as in redis.
pub struct Canvas {
    width: i32,
    height: i32,
    /// Four pixels a byte, row after row.
    pixels: Vec<u8>,
}

impl Canvas {
    /// A canvas filled with `bg` (`lwCreateCanvas`). Sizes below zero are
    /// empty.
    pub fn new(width: i32, height: i32, bg: u8) -> Canvas {
        let (width, height) = (width.max(0), height.max(0));
        let n = width as usize * height as usize;
        let bg = bg & 3;
        let fill = bg | bg << 2 | bg << 4 | bg << 6;
        Canvas {
            width,
            height,
            pixels: vec![fill; n.div_ceil(4)],
        }
    }

    /// Its width in pixels.
    pub fn width(&self) -> i32 {
        self.width
    }

    /// Its height in pixels.
    pub fn height(&self) -> i32 {
        self.height
    }

    fn index(&self, x: i32, y: i32) -> Option<(usize, u32)> {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return None;
        }
        let i = x as usize + y as usize * self.width as usize;
        Some((i / 4, (i % 4) as u32 * 2))
    }

    /// Sets a pixel (`lwDrawPixel`).
    pub fn draw_pixel(&mut self, x: i32, y: i32, color: u8) {
        if let Some((byte, shift)) = self.index(x, y) {
            let b = &mut self.pixels[byte];
            *b = (*b & !(3 << shift)) | ((color & 3) << shift);
        }
    }

    /// A pixel's colour (`lwGetPixel`).
    pub fn pixel(&self, x: i32, y: i32) -> u8 {
        self.index(x, y)
            .map_or(0, |(byte, shift)| (self.pixels[byte] >> shift) & 3)
    }

    /// A line from (x1, y1) to (x2, y2), Bresenham's (`lwDrawLine`).
    pub fn draw_line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let dx = (x2 - x1).abs();
        let dy = (y2 - y1).abs();
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.draw_pixel(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square centred on (x, y), `size` wide, turned by `angle` radians
    /// (`lwDrawSquare`): its corners are points of the circle around it,
    /// a quarter turn apart. The float and double steps are C's.
    pub fn draw_square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // The inscribed square of a unit circle has sides of sqrt(2):
        // redis's literal, not SQRT_2, so that sizes round as in redis.
        #[allow(clippy::approx_constant)]
        let size = (f64::from(size) / 1.4142135623) as f32;
        let size = f64::from(size).round() as f32;
        let mut k = (std::f64::consts::FRAC_PI_4 + f64::from(angle)) as f32;
        let (mut px, mut py) = ([0i32; 4], [0i32; 4]);
        for j in 0..4 {
            px[j] = (f64::from(k).sin() * f64::from(size) + f64::from(x)).round() as i32;
            py[j] = (f64::from(k).cos() * f64::from(size) + f64::from(y)).round() as i32;
            k = (f64::from(k) + std::f64::consts::FRAC_PI_2) as f32;
        }
        for j in 0..4 {
            let n = (j + 1) % 4;
            self.draw_line(px[j], py[j], px[n], py[n], color);
        }
    }
}

/// Schotter on a canvas `cols * 2` pixels wide (`lwDrawSchotter`): the
/// squares' side is the width (less a padding of 2 on each side) over
/// `per_row`, and from the third row down each square turns by and moves
/// up to a fraction of its side that grows with the row.
pub fn schotter(cols: i32, per_row: i32, per_col: i32, rng: &mut impl Rng) -> Canvas {
    let canvas_width = cols * 2;
    let padding = if canvas_width > 4 { 2 } else { 0 };
    let square_side = (canvas_width - padding * 2) as f32 / per_row as f32;
    let canvas_height = (square_side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(canvas_width, canvas_height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * square_side + square_side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * square_side + square_side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r = [0.0f32; 3];
                for v in &mut r {
                    *v = c_rand(rng) as f32 / RAND_MAX as f32 / per_col as f32 * y as f32;
                }
                for v in &mut r {
                    if c_rand(rng) % 2 != 0 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * square_side / 3.0) as i32;
                sy = (sy as f32 + r[2] * square_side / 3.0) as i32;
            }
            canvas.draw_square(sx, sy, square_side, angle, 1);
        }
    }
    canvas
}

/// The canvas in braille (lolwut5's `renderCanvas`): each character is a
/// 2x4 block, its dots numbered as the Unicode braille block numbers them
/// (left column 0, 1, 2 then 6; right column 3, 4, 5 then 7). Each row
/// of characters ends in a newline, except one whose block starts on the
/// canvas's last pixel row.
fn render_braille(canvas: &Canvas, out: &mut String) {
    const BITS: [(i32, i32, u32); 8] = [
        (0, 0, 0),
        (0, 1, 1),
        (0, 2, 2),
        (1, 0, 3),
        (1, 1, 4),
        (1, 2, 5),
        (0, 3, 6),
        (1, 3, 7),
    ];
    for y in (0..canvas.height).step_by(4) {
        for x in (0..canvas.width).step_by(2) {
            let byte = BITS
                .iter()
                .filter(|(dx, dy, _)| canvas.pixel(x + dx, y + dy) != 0)
                .fold(0u32, |b, (_, _, bit)| b | 1 << bit);
            out.push(char::from_u32(0x2800 + byte).unwrap_or(' '));
        }
        if y != canvas.height - 1 {
            out.push('\n');
        }
    }
}

/// One building of the skyline (lolwut6's `struct skyscraper`).
struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

/// Draws a building standing on the canvas's bottom row
/// (`generateSkyscraper`): a roof two pixels narrower on each side and,
/// with windows, two-pixel-wide windows of the other grays on every other
/// row inside its walls.
fn skyscraper(canvas: &mut Canvas, si: &Skyscraper, rng: &mut impl Rng) {
    let starty = canvas.height - 1;
    let endy = starty - si.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in si.xoff..si.xoff + si.width {
            if y == endy && (x <= si.xoff + 1 || x >= si.xoff + si.width - 2) {
                continue;
            }
            let mut color = si.color;
            if si.windows
                && x > si.xoff + 1
                && x < si.xoff + si.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (si.xoff + 1);
                let rely = y - (endy + 1);
                // C's `relx/2 % 2 && rely % 2`: truncating division and
                // remainder, so negative values count as in C.
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + (c_rand(rng) % 2) as u8;
                        if color != si.color {
                            break;
                        }
                    }
                    // A window's two pixels are the same gray.
                    if relx % 2 != 0 {
                        color = canvas.pixel(x - 1, y);
                    }
                }
            }
            canvas.draw_pixel(x, y, color);
        }
        y -= 1;
    }
}

/// The skyline (`generateSkyline`): two rows of window-less buildings in
/// the two grays, the lighter behind, then black buildings with windows
/// in front. C's `rand()%canvas->height/2` is `(rand() % height) / 2`.
fn skyline(canvas: &mut Canvas, rng: &mut impl Rng) {
    let h = canvas.height;
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += c_rand(rng) % 8;
            let width = 10 + c_rand(rng) % 9;
            let height = if color == 2 {
                h / 2 + c_rand(rng) % h / 2
            } else {
                h / 2 + c_rand(rng) % h / 3
            };
            let si = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(canvas, &si, rng);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < canvas.width {
        offset += c_rand(rng) % 8;
        let mut width = 5 + c_rand(rng) % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + c_rand(rng) % h / 2;
        let si = Skyscraper {
            xoff: offset,
            width,
            height,
            windows: true,
            color: 0,
        };
        skyscraper(canvas, &si, rng);
        offset += width + 5;
    }
}

/// The canvas as terminal cells (lolwut6's `renderCanvas`): each pixel a
/// space between an escape that sets both colours to one of four grays
/// and a reset; a newline after every row but the last.
fn render_cells(canvas: &Canvas, out: &mut String) {
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let ce = match canvas.pixel(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            out.push_str("\x1b[");
            out.push_str(ce);
            out.push_str(" \x1b[0m");
        }
        if y != canvas.height - 1 {
            out.push('\n');
        }
    }
}

/// Which piece LOLWUT draws, with its parameters already clamped to
/// redis's limits.
enum Piece {
    /// No art: the version line alone (redis 7.0's own, and any version
    /// but 5 and 6).
    None,
    /// Version 5: Schotter, `cols` characters wide.
    Schotter {
        cols: i32,
        per_row: i32,
        per_col: i32,
    },
    /// Version 6: the skyline, `cols` by `rows` cells.
    Skyline { cols: i32, rows: i32 },
}

/// `LOLWUT [VERSION version] [version-specific arguments ...]`
pub struct Lolwut(Piece);

/// The art's parameters: those given replace the defaults in order, each
/// an integer (else redis's error) then clamped to `1..=max`.
fn params<const N: usize>(
    given: &[bytes::Bytes],
    defaults: [i64; N],
    max: [i64; N],
) -> Result<[i32; N], CommandError> {
    let mut out = [0i32; N];
    for i in 0..N {
        let v = match given.get(i) {
            Some(arg) => crate::args::parse_i64(arg).ok_or(CommandError::NotInteger)?,
            None => defaults[i],
        };
        out[i] = v.clamp(1, max[i]) as i32;
    }
    Ok(out)
}

impl ReadCommand for Lolwut {
    fn parse(args: &mut Args, _s: &Ctx<'_>) -> Result<Self, CommandError> {
        Lolwut::from_args(&args.rest())
    }

    fn apply(self, _view: &View<'_, '_>) -> Result<Reply, CommandError> {
        Ok(Reply::Verbatim(self.render(&mut rand::rng())))
    }
}

impl Lolwut {
    /// The command from its arguments (after LOLWUT).
    fn from_args(all: &[bytes::Bytes]) -> Result<Lolwut, CommandError> {
        // redis's `lolwutCommand`: VERSION counts only as the first
        // argument with a value after it, and the version picks the piece
        // by the first characters of "%u.0.0".
        let (version, rest) = match all {
            [opt, v, rest @ ..] if opt.eq_ignore_ascii_case(b"version") => {
                let v = crate::args::parse_i64(v).ok_or(CommandError::NotInteger)?;
                (Some(v as u32), rest)
            }
            _ => (None, all),
        };
        Ok(Lolwut(match version {
            Some(5) => {
                let [cols, per_row, per_col] = params(rest, [66, 8, 12], [1000, 200, 200])?;
                Piece::Schotter {
                    cols,
                    per_row,
                    per_col,
                }
            }
            Some(6) => {
                let [cols, rows] = params(rest, [80, 20], [1000, 1000])?;
                Piece::Skyline { cols, rows }
            }
            _ => Piece::None,
        }))
    }

    /// The reply's text: the art, then its signature line.
    fn render(self, rng: &mut impl Rng) -> String {
        let version = crate::cmd::info::REDIS_VERSION;
        let mut out = String::new();
        match self.0 {
            Piece::None => {}
            Piece::Schotter {
                cols,
                per_row,
                per_col,
            } => {
                render_braille(&schotter(cols, per_row, per_col, rng), &mut out);
                out.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. ");
            }
            Piece::Skyline { cols, rows } => {
                let mut canvas = Canvas::new(cols, rows, 3);
                skyline(&mut canvas, rng);
                render_cells(&canvas, &mut out);
                out.push_str(
                    "\nDedicated to the 8 bit game developers of past and present.\n\
                     Original 8 bit image from Plaguemon by hikikomori. ",
                );
            }
        }
        out.push_str("Redis ver. ");
        out.push_str(version);
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Lolwut, CommandError> {
        let items: Vec<bytes::Bytes> = args
            .iter()
            .map(|a| bytes::Bytes::copy_from_slice(a.as_bytes()))
            .collect();
        Lolwut::from_args(&items)
    }

    fn art(args: &[&str]) -> String {
        parse(args).expect("parses").render(&mut rand::rng())
    }

    #[test]
    fn pixels_round_trip_and_outside_is_blank() {
        let mut c = Canvas::new(5, 3, 3);
        assert_eq!(c.pixel(4, 2), 3);
        c.draw_pixel(1, 1, 2);
        c.draw_pixel(2, 1, 0);
        c.draw_pixel(-1, 0, 1);
        c.draw_pixel(5, 0, 1);
        assert_eq!((c.pixel(1, 1), c.pixel(2, 1), c.pixel(0, 1)), (2, 0, 3));
        assert_eq!((c.pixel(-1, 0), c.pixel(5, 0), c.pixel(0, 3)), (0, 0, 0));
    }

    #[test]
    fn an_upright_square_is_its_outline() {
        // Size 4 becomes round(4 / sqrt 2) = 3: corners at (2±2, 2±2)
        // rounded from 3 * sin/cos(pi/4 + n pi/2) = ±2.12.
        let mut c = Canvas::new(6, 6, 0);
        c.draw_square(2, 2, 4.0, 0.0, 1);
        let rows: Vec<String> = (0..6)
            .map(|y| {
                (0..6)
                    .map(|x| if c.pixel(x, y) == 1 { '#' } else { '.' })
                    .collect()
            })
            .collect();
        assert_eq!(
            rows,
            ["#####.", "#...#.", "#...#.", "#...#.", "#####.", "......"]
        );
    }

    #[test]
    fn schotter_has_redis_size_and_braille_only() {
        // Defaults: 66 columns, side (132 - 4) / 8 = 16, height 16 * 12 + 4
        // = 196 pixels: 49 lines of 66 characters, every one ending in a
        // newline (195 is not a multiple of 4), then the blank line the
        // signature's own newline makes.
        let text = art(&["VERSION", "5"]);
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines.len(), 49 + 3, "{text}");
        assert!(lines[..49].iter().all(|l| l.chars().count() == 66
            && l.chars().all(|c| ('\u{2800}'..='\u{28ff}').contains(&c))));
        assert_eq!(lines[49], "");
        assert_eq!(
            lines[50],
            "Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15"
        );
        assert_eq!(lines[51], "");
        // Every square of the top row is drawn: the art is not blank.
        assert!(lines[1].chars().any(|c| c != '\u{2800}'));
        // One column, one square: 2x2 pixels, one character, a newline
        // (0 is not the last row, 1), then the signature's.
        assert!(art(&["VERSION", "5", "1", "1", "1"]).starts_with("⠋\n\nGeorg Nees"));
    }

    #[test]
    fn skyline_is_cols_by_rows_cells_of_four_grays() {
        let text = art(&["version", "6", "30", "7"]);
        let (canvas, sig) = text.split_at(text.find("\nDedicated").expect("signature"));
        assert_eq!(
            sig,
            "\nDedicated to the 8 bit game developers of past and present.\n\
             Original 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.15\n"
        );
        let rows: Vec<&str> = canvas.split('\n').collect();
        assert_eq!(rows.len(), 7);
        for row in rows {
            let cells: Vec<&str> = row.split(" \x1b[0m").collect();
            assert_eq!(cells.len(), 31, "{row:?}");
            assert_eq!(cells[30], "");
            for c in &cells[..30] {
                assert!(
                    [
                        "\x1b[0;30;40m",
                        "\x1b[0;90;100m",
                        "\x1b[0;37;47m",
                        "\x1b[0;97;107m"
                    ]
                    .contains(c),
                    "{c:?}"
                );
            }
        }
    }

    #[test]
    fn arguments_as_redis_reads_them() {
        let plain = "Redis ver. 7.0.15\n";
        // Without VERSION 5 or 6 every other argument is ignored.
        for args in [
            &[][..],
            &["foo"],
            &["VERSION"],
            &["VERSION", "7", "x"],
            &["VERSION", "-5"],
            &["x", "VERSION", "5"],
        ] {
            assert_eq!(art(args), plain, "{args:?}");
        }
        // The version modulo 2^32.
        assert!(art(&["VERSION", "4294967301", "1", "1", "1"]).contains("Georg Nees"));
        for args in [
            &["VERSION", "x"][..],
            &["VERSION", "5", "1.5"],
            &["VERSION", "5", "1", "1", "x"],
            &["VERSION", "6", "80", "-0"],
        ] {
            assert!(
                matches!(parse(args), Err(CommandError::NotInteger)),
                "{args:?}"
            );
        }
        // Clamped, and arguments past the piece's are ignored.
        let text = art(&["VERSION", "6", "-5", "0", "x", "y"]);
        assert!(
            text.starts_with("\x1b[0;97;107m \x1b[0m\nDedicated"),
            "{text:?}"
        );
        let Lolwut(Piece::Schotter {
            cols,
            per_row,
            per_col,
        }) = parse(&["VERSION", "5", "5000", "0", "999"]).expect("parses")
        else {
            panic!("not schotter")
        };
        assert_eq!((cols, per_row, per_col), (1000, 1, 200));
    }
}
