//! A PDF pre-scan that refuses decompression bombs before a parser runs.
//!
//! lopdf and pdf-extract decode every stream whole into memory, once per
//! reference: four pages that share one 256 MiB deflate stream cost a
//! gigabyte, from a file of a few hundred kilobytes. The scan walks the raw
//! bytes, decodes each stream's filter chain with streaming decoders that
//! stop at the budget (never holding the output), and charges each stream's
//! size once per reference to it. Objects are counted, those packed in object
//! streams included.

use std::collections::HashMap;

use flate2::{Decompress, FlushDecompress, Status};

use crate::{LimitError, Limits};

/// What the scan saw of a file that passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scan {
    /// Bytes the parser will decode, each stream counted once per reference.
    pub inflated_bytes: u64,
    pub objects: u64,
    pub streams: u64,
}

/// Most of an object stream's decoded bytes read for the references it holds.
const OBJECT_STREAM_PEEK: u64 = 16 * 1024 * 1024;

type ObjectId = (u32, u16);

struct Stream {
    id: Option<ObjectId>,
    dict: std::ops::Range<usize>,
    data: std::ops::Range<usize>,
}

/// Checks `bytes` against the PDF limits.
pub fn prescan(bytes: &[u8], limits: &Limits) -> Result<Scan, LimitError> {
    let mut refs: HashMap<ObjectId, u64> = HashMap::new();
    let mut objects = 0u64;
    let mut streams = Vec::new();
    let mut pos = 0;
    let mut current: Option<(ObjectId, usize)> = None;
    while pos < bytes.len() {
        let Some(at) = find(bytes, pos, b"stream") else {
            scan_tokens(&bytes[pos..], pos, &mut refs, &mut objects, &mut current);
            break;
        };
        scan_tokens(&bytes[pos..at], pos, &mut refs, &mut objects, &mut current);
        pos = at + b"stream".len();
        if !opens_stream(bytes, at) {
            continue;
        }
        let mut data_start = pos;
        if bytes.get(data_start) == Some(&b'\r') {
            data_start += 1;
        }
        if bytes.get(data_start) == Some(&b'\n') {
            data_start += 1;
        }
        let data_end = find(bytes, data_start, b"endstream").unwrap_or(bytes.len());
        streams.push(Stream {
            id: current.map(|(id, _)| id),
            dict: current.map_or(pos, |(_, p)| p)..at,
            data: data_start..data_end,
        });
        pos = (data_end + b"endstream".len()).min(bytes.len());
    }
    check_objects(objects, limits)?;

    let budget = limits.pdf_max_inflated_bytes;
    let mut total = 0u64;
    // Object streams first: they hold objects (and references) the raw bytes do not show.
    let (packed, plain): (Vec<&Stream>, Vec<&Stream>) = streams
        .iter()
        .partition(|s| has_name(&bytes[s.dict.clone()], b"/Type", b"ObjStm"));
    for stream in &packed {
        let dict = &bytes[stream.dict.clone()];
        objects += integer_after(dict, b"/N").unwrap_or(0);
        check_objects(objects, limits)?;
        let mut peek = Vec::new();
        let size = decoded_size(dict, &bytes[stream.data.clone()], budget - total, |chunk| {
            let room = OBJECT_STREAM_PEEK.saturating_sub(peek.len() as u64) as usize;
            peek.extend_from_slice(&chunk[..chunk.len().min(room)]);
        })
        .ok_or(LimitError::PdfInflated { limit: budget })?;
        total += size;
        let mut ignored = None;
        let mut inner_objects = 0;
        scan_tokens(&peek, 0, &mut refs, &mut inner_objects, &mut ignored);
    }
    for stream in &plain {
        let times = stream
            .id
            .and_then(|id| refs.get(&id).copied())
            .unwrap_or(1)
            .max(1);
        let room = (budget - total) / times;
        let dict = &bytes[stream.dict.clone()];
        let size = decoded_size(dict, &bytes[stream.data.clone()], room, |_| {})
            .ok_or(LimitError::PdfInflated { limit: budget })?;
        total += size * times;
        if total > budget {
            return Err(LimitError::PdfInflated { limit: budget });
        }
    }
    Ok(Scan {
        inflated_bytes: total,
        objects,
        streams: streams.len() as u64,
    })
}

fn check_objects(count: u64, limits: &Limits) -> Result<(), LimitError> {
    if count > limits.pdf_max_objects {
        return Err(LimitError::PdfObjects {
            count,
            limit: limits.pdf_max_objects,
        });
    }
    Ok(())
}

/// `stream` at `at` is the keyword when a dictionary's `>>` comes just
/// before it (so `endstream`, and the word inside text, are not).
fn opens_stream(bytes: &[u8], at: usize) -> bool {
    bytes[..at].trim_ascii_end().ends_with(b">>")
}

/// Counts `N G obj` headers and `N G R` references in `region` (which starts
/// at `offset` in the file), remembering the last header and where it is.
fn scan_tokens(
    region: &[u8],
    offset: usize,
    refs: &mut HashMap<ObjectId, u64>,
    objects: &mut u64,
    current: &mut Option<(ObjectId, usize)>,
) {
    let mut i = 0;
    while i < region.len() {
        let b = region[i];
        if b == b'R'
            && ends_token(region, i + 1)
            && let Some(id) = id_before(region, i)
        {
            *refs.entry(id).or_insert(0) += 1;
        } else if b == b'o'
            && region[i..].starts_with(b"obj")
            && ends_token(region, i + 3)
            && let Some(id) = id_before(region, i)
        {
            *objects += 1;
            *current = Some((id, offset + i + 3));
        }
        i += 1;
    }
}

fn is_white(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0c | 0)
}

fn is_delimiter(b: u8) -> bool {
    is_white(b)
        || matches!(
            b,
            b'/' | b'[' | b']' | b'<' | b'>' | b'(' | b')' | b'%' | b'{' | b'}'
        )
}

fn ends_token(region: &[u8], at: usize) -> bool {
    region.get(at).is_none_or(|b| is_delimiter(*b))
}

/// `N G` just before the keyword at `at`, separated by white space.
fn id_before(region: &[u8], at: usize) -> Option<ObjectId> {
    let (generation, rest) = number_before(&region[..at])?;
    let (number, rest) = number_before(rest)?;
    if rest.last().is_some_and(|b| !is_delimiter(*b)) {
        return None;
    }
    Some((u32::try_from(number).ok()?, u16::try_from(generation).ok()?))
}

/// The integer ending `text` after at least one white space, and what is before it.
fn number_before(text: &[u8]) -> Option<(u64, &[u8])> {
    let trimmed = text.trim_ascii_end();
    if trimmed.len() == text.len() {
        return None;
    }
    let digits = trimmed
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 10 {
        return None;
    }
    let (rest, number) = trimmed.split_at(trimmed.len() - digits);
    let number = std::str::from_utf8(number).ok()?.parse().ok()?;
    Some((number, rest))
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let first = needle[0];
    let mut i = from;
    while i + needle.len() <= bytes.len() {
        let p = bytes[i..].iter().position(|b| *b == first)?;
        i += p;
        if bytes[i..].starts_with(needle) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// True when `dict` has `key` followed by the name `/value`.
fn has_name(dict: &[u8], key: &[u8], value: &[u8]) -> bool {
    names_after(dict, key).iter().any(|n| n == value)
}

/// The names given to `key`: one name, or an array of them.
fn names_after(dict: &[u8], key: &[u8]) -> Vec<Vec<u8>> {
    let Some(at) = find_key(dict, key) else {
        return Vec::new();
    };
    let rest = dict[at + key.len()..].trim_ascii_start();
    let (list, single) = match rest.strip_prefix(b"[") {
        Some(inner) => (inner, false),
        None => (rest, true),
    };
    let mut names = Vec::new();
    let mut r = list.trim_ascii_start();
    while let Some(after) = r.strip_prefix(b"/") {
        let len = after.iter().take_while(|b| !is_delimiter(**b)).count();
        names.push(after[..len].to_vec());
        if single {
            break;
        }
        r = after[len..].trim_ascii_start();
    }
    names
}

/// Where `key` stands as a whole name in `dict`.
fn find_key(dict: &[u8], key: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = find(dict, from, key) {
        if ends_token(dict, at + key.len()) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn integer_after(dict: &[u8], key: &[u8]) -> Option<u64> {
    let at = find_key(dict, key)?;
    let rest = dict[at + key.len()..].trim_ascii_start();
    let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..len]).ok()?.parse().ok()
}

/// The size of `data` decoded by the filters its `dict` names, as lopdf
/// decodes them (FlateDecode, LZWDecode, ASCII85Decode; a filter it does
/// not know leaves the bytes as they are). None once the size passes `room`;
/// `sink` sees the decoded bytes.
fn decoded_size(dict: &[u8], data: &[u8], room: u64, mut sink: impl FnMut(&[u8])) -> Option<u64> {
    let filters = names_after(dict, b"/Filter");
    let mut input = std::borrow::Cow::Borrowed(data);
    for (index, filter) in filters.iter().enumerate() {
        let last = index + 1 == filters.len();
        let mut kept = Vec::new();
        let mut emit = |chunk: &[u8]| {
            if last {
                sink(chunk);
            } else {
                kept.extend_from_slice(chunk);
            }
        };
        let size = match filter.as_slice() {
            b"FlateDecode" | b"Fl" => inflate(&input, room, &mut emit),
            b"LZWDecode" | b"LZW" => lzw(&input, dict, room, &mut emit),
            b"ASCII85Decode" | b"A85" => ascii85(&input, room, &mut emit),
            // lopdf gives up on the chain and the raw bytes are read instead.
            _ => {
                sink(data);
                return (data.len() as u64 <= room).then_some(data.len() as u64);
            }
        };
        let size = size?;
        if last {
            return Some(size);
        }
        input = std::borrow::Cow::Owned(kept);
    }
    sink(&input);
    (input.len() as u64 <= room).then_some(input.len() as u64)
}

/// Inflates zlib data (raw deflate after the header when the zlib framing is
/// broken, as lopdf retries); None past `room`.
fn inflate(input: &[u8], room: u64, emit: &mut dyn FnMut(&[u8])) -> Option<u64> {
    let size = inflate_with(input, true, room, emit)?;
    if size == 0 && input.len() > 2 {
        return inflate_with(&input[2..], false, room, emit);
    }
    Some(size)
}

fn inflate_with(input: &[u8], zlib: bool, room: u64, emit: &mut dyn FnMut(&[u8])) -> Option<u64> {
    let mut inflater = Decompress::new(zlib);
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let before_in = inflater.total_in();
        let before_out = inflater.total_out();
        let offset = usize::try_from(before_in)
            .unwrap_or(input.len())
            .min(input.len());
        let status = inflater.decompress(&input[offset..], &mut buffer, FlushDecompress::None);
        let produced = (inflater.total_out() - before_out) as usize;
        emit(&buffer[..produced]);
        if inflater.total_out() > room {
            return None;
        }
        match status {
            Ok(Status::StreamEnd) | Err(_) => return Some(inflater.total_out()),
            Ok(_) if produced == 0 && inflater.total_in() == before_in => {
                return Some(inflater.total_out());
            }
            Ok(_) => {}
        }
    }
}

fn lzw(input: &[u8], dict: &[u8], room: u64, emit: &mut dyn FnMut(&[u8])) -> Option<u64> {
    use weezl::{BitOrder, LzwStatus, decode::Decoder};
    let early_change = integer_after(dict, b"/EarlyChange").is_none_or(|v| v != 0);
    let mut decoder = if early_change {
        Decoder::with_tiff_size_switch(BitOrder::Msb, 8)
    } else {
        Decoder::new(BitOrder::Msb, 8)
    };
    let mut buffer = vec![0u8; 64 * 1024];
    let mut consumed = 0;
    let mut total = 0u64;
    loop {
        let result = decoder.decode_bytes(&input[consumed..], &mut buffer);
        consumed += result.consumed_in;
        total += result.consumed_out as u64;
        emit(&buffer[..result.consumed_out]);
        if total > room {
            return None;
        }
        match result.status {
            Ok(LzwStatus::Ok) if result.consumed_in + result.consumed_out > 0 => {}
            _ => return Some(total),
        }
    }
}

/// ASCII85 grows at most fivefold (`z` is four zero bytes), so it is decoded whole.
fn ascii85(input: &[u8], room: u64, emit: &mut dyn FnMut(&[u8])) -> Option<u64> {
    let mut out = Vec::new();
    let mut group = [0u32; 5];
    let mut n = 0;
    let body = input.strip_prefix(b"<~").unwrap_or(input);
    for &b in body {
        match b {
            b'~' => break,
            b'z' if n == 0 => out.extend_from_slice(&[0; 4]),
            b'!'..=b'u' => {
                group[n] = u32::from(b - b'!');
                n += 1;
                if n == 5 {
                    let value = group
                        .iter()
                        .fold(0u32, |acc, d| acc.wrapping_mul(85).wrapping_add(*d));
                    out.extend_from_slice(&value.to_be_bytes());
                    n = 0;
                }
            }
            _ => {}
        }
    }
    if n > 1 {
        for slot in group.iter_mut().skip(n) {
            *slot = 84;
        }
        let value = group
            .iter()
            .fold(0u32, |acc, d| acc.wrapping_mul(85).wrapping_add(*d));
        out.extend_from_slice(&value.to_be_bytes()[..n - 1]);
    }
    if out.len() as u64 > room {
        return None;
    }
    emit(&out);
    Some(out.len() as u64)
}
