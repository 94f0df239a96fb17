//! Splitting extracted text into chunks for embedding and keyword search, along the
//! document's own structure: sections, paragraphs, lines, sentences, words.

use serde::{Deserialize, Serialize};

use crate::metadata::{Heading, PageSpan};
use crate::offsets::{ByteCursor, CharCursor};

/// Sizes in characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkOptions {
    /// Size chunks grow to by merging small paragraphs.
    pub target_chars: usize,
    /// Hard ceiling; a single paragraph above it is split at lines, sentences, words.
    pub max_chars: usize,
    /// How far a chunk reaches back into the previous one when a paragraph had to be cut
    /// mid-flow (at sentences or words), so a thought cut in two is still whole in one chunk.
    /// Chunks separated at paragraph, line or section boundaries never overlap.
    pub overlap_chars: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            target_chars: 900,
            max_chars: 1500,
            overlap_chars: 100,
        }
    }
}

/// One piece of a document's text: `text` is exactly the characters `char_start..char_end`
/// (end-exclusive, in Unicode scalar values) of the extracted text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    pub ordinal: u32,
    pub text: String,
    pub char_start: u64,
    pub char_end: u64,
    /// The headings that enclose the whole chunk, outermost first.
    pub heading_path: Vec<String>,
    /// 1-based PDF page the chunk lies on.
    pub page: Option<u32>,
}

/// Where a piece was cut from what came before it; the order is the order splitting tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Paragraph,
    Line,
    Sentence,
    Word,
    Char,
}

impl Level {
    fn finer(self) -> Level {
        match self {
            Level::Paragraph => Level::Line,
            Level::Line => Level::Sentence,
            Level::Sentence => Level::Word,
            Level::Word | Level::Char => Level::Char,
        }
    }
}

/// A run of text between two headings or page starts. Byte offsets.
#[derive(Debug)]
struct Section {
    start: usize,
    end: usize,
    path: Vec<String>,
    page: Option<u32>,
    /// Starts a new page: nothing merges across it, so every chunk has one page.
    hard_start: bool,
    chars: usize,
}

/// A chunk in the making. Byte offsets.
#[derive(Debug)]
struct Draft {
    start: usize,
    end: usize,
    first_section: usize,
    last_section: usize,
    /// `None` for the first piece of a section.
    cut: Option<Level>,
}

/// Splits `text` into chunks. `headings` and `pages` come from the same extraction (offsets in
/// characters into `text`); either may be empty.
pub fn chunk(
    text: &str,
    headings: &[Heading],
    pages: &[PageSpan],
    opts: &ChunkOptions,
) -> Vec<Chunk> {
    let max = opts.max_chars.max(1);
    let target = opts.target_chars.clamp(1, max);
    let sizes = Sizes {
        target,
        max,
        overlap: opts.overlap_chars.min(target / 2),
    };

    let sections = sections(text, headings, pages);
    let mut drafts: Vec<Draft> = Vec::new();
    for (index, section) in sections.iter().enumerate() {
        let mut pieces = Vec::new();
        split(
            text,
            section.start,
            section.end,
            Level::Paragraph,
            None,
            &sizes,
            &mut pieces,
        );
        for (start, end, cut) in pieces {
            let draft = Draft {
                start,
                end,
                first_section: index,
                last_section: index,
                cut,
            };
            match drafts.last_mut() {
                Some(previous)
                    if cut.is_none() && joins(previous, &draft, &sections, text, &sizes) =>
                {
                    previous.end = draft.end;
                    previous.last_section = index;
                }
                _ => drafts.push(draft),
            }
        }
    }

    let mut cursor = CharCursor::new(text);
    let mut chunks = Vec::with_capacity(drafts.len());
    for draft in &drafts {
        let first = &sections[draft.first_section];
        let start = match draft.cut {
            Some(level) if level >= Level::Sentence && sizes.overlap > 0 => {
                overlap_start(text, first.start, draft.start, draft.end, &sizes)
            }
            _ => draft.start,
        };
        let char_start = cursor.char_at(start);
        let char_end = cursor.char_at(draft.end);
        let path = sections[draft.first_section + 1..=draft.last_section]
            .iter()
            .fold(first.path.clone(), |common, s| {
                common_prefix(common, &s.path)
            });
        chunks.push(Chunk {
            ordinal: u32::try_from(chunks.len()).unwrap_or(u32::MAX),
            text: text[start..draft.end].to_string(),
            char_start,
            char_end,
            heading_path: path,
            page: first.page,
        });
    }
    chunks
}

/// What gets embedded for a chunk: the document title and the headings above the chunk give
/// the model the context a reader would have, then the chunk's own text.
pub fn embedding_input(chunk: &Chunk, title: Option<&str>) -> String {
    let title = title.map(str::trim).filter(|t| !t.is_empty());
    let mut context: Vec<&str> = Vec::new();
    if let Some(title) = title {
        context.push(title);
    }
    // The top heading usually repeats the title; saying it twice adds nothing.
    let headings: Vec<&str> = chunk
        .heading_path
        .iter()
        .map(String::as_str)
        .filter(|h| Some(*h) != title)
        .collect();
    let mut input = String::new();
    if let Some(title) = title {
        input.push_str(title);
        input.push('\n');
    }
    if !headings.is_empty() {
        input.push_str(&headings.join(" > "));
        input.push('\n');
    }
    if !input.is_empty() {
        input.push('\n');
    }
    input.push_str(&chunk.text);
    input
}

#[derive(Debug)]
struct Sizes {
    target: usize,
    max: usize,
    overlap: usize,
}

fn sections(text: &str, headings: &[Heading], pages: &[PageSpan]) -> Vec<Section> {
    let mut sorted: Vec<&Heading> = headings.iter().collect();
    sorted.sort_by_key(|h| h.char_offset);
    let mut to_byte = ByteCursor::new(text);
    // (byte offset, heading index or none, starts a page)
    let mut marks: Vec<(usize, Option<usize>, Option<u32>)> = vec![(0, None, None)];
    let heading_bytes: Vec<usize> = sorted
        .iter()
        .map(|h| to_byte.byte_at(h.char_offset))
        .collect();
    marks.extend(
        heading_bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| (b, Some(i), None)),
    );
    let mut page_starts: Vec<&PageSpan> = pages.iter().collect();
    page_starts.sort_by_key(|p| p.char_start);
    let mut to_byte = ByteCursor::new(text);
    marks.extend(
        page_starts
            .iter()
            .map(|p| (to_byte.byte_at(p.char_start), None, Some(p.page))),
    );
    marks.sort_by_key(|&(b, heading, page)| (b, page.is_none(), heading));

    let mut stack: Vec<&Heading> = Vec::new();
    let mut page = None;
    let mut out: Vec<Section> = Vec::new();
    let mut i = 0;
    while i < marks.len() {
        let at = marks[i].0;
        let mut hard = false;
        while i < marks.len() && marks[i].0 == at {
            if let Some(h) = marks[i].1 {
                let heading = sorted[h];
                while stack.last().is_some_and(|top| top.level >= heading.level) {
                    stack.pop();
                }
                stack.push(heading);
            }
            if let Some(p) = marks[i].2 {
                page = Some(p);
                hard = at > 0;
            }
            i += 1;
        }
        let end = marks.get(i).map_or(text.len(), |m| m.0);
        let (start, trimmed_end) = trim(text, at, end);
        out.push(Section {
            start: at,
            end,
            path: stack.iter().map(|h| h.text.clone()).collect(),
            page,
            hard_start: hard,
            chars: text[start..trimmed_end].chars().count(),
        });
    }
    out
}

/// Whether `next`, the first piece of its section, may join `previous`: only across a heading
/// (never a page), only when one of the two sections is small, and only within the target
/// size, except that a section holding little more than its heading always joins what follows
/// when the result stays under the ceiling.
fn joins(previous: &Draft, next: &Draft, sections: &[Section], text: &str, sizes: &Sizes) -> bool {
    let before = &sections[previous.last_section];
    let after = &sections[next.first_section];
    if after.hard_start || previous.last_section == next.first_section {
        return false;
    }
    let combined = char_len(text, previous.start, next.end);
    let small = |s: &Section| s.chars * 2 < sizes.target;
    let tiny = before.chars * 8 < sizes.target
        && char_len(text, previous.start, previous.end) * 8 < sizes.target;
    (combined <= sizes.target && (small(before) || small(after))) || (tiny && combined <= sizes.max)
}

/// Cuts `[start, end)` into trimmed pieces no longer than `max` characters, trying each level
/// of structure in turn and packing neighbouring segments up to `target`. Each piece carries the
/// level at which it was cut from the piece before it.
fn split(
    text: &str,
    start: usize,
    end: usize,
    level: Level,
    cut: Option<Level>,
    sizes: &Sizes,
    out: &mut Vec<(usize, usize, Option<Level>)>,
) {
    let (start, end) = trim(text, start, end);
    if start == end {
        return;
    }
    let first_cut = cut;
    if char_len(text, start, end) <= sizes.target {
        out.push((start, end, first_cut));
        return;
    }
    if level == Level::Char {
        hard_cut(text, start, end, first_cut, sizes, out);
        return;
    }
    let segments = segments(text, start, end, level);
    if segments.len() <= 1 {
        split(text, start, end, level.finer(), first_cut, sizes, out);
        return;
    }
    let mut next_cut = first_cut;
    let mut current: Option<(usize, usize)> = None;
    let flush = |current: &mut Option<(usize, usize)>,
                 out: &mut Vec<(usize, usize, Option<Level>)>,
                 next_cut: &mut Option<Level>| {
        if let Some((s, e)) = current.take() {
            out.push((s, e, *next_cut));
            *next_cut = Some(level);
        }
    };
    for (seg_start, seg_end) in segments {
        let (seg_start, seg_end) = trim(text, seg_start, seg_end);
        if seg_start == seg_end {
            continue;
        }
        let seg_len = char_len(text, seg_start, seg_end);
        if let Some((s, e)) = current {
            let combined = char_len(text, s, seg_end);
            // A short piece (a title or heading line, a lead-in such as "Example:") does not
            // stand alone before what follows it: it joins it, past the target as long as the
            // ceiling holds, or else starts the first piece cut from it.
            let short = char_len(text, s, e) * 4 < sizes.target;
            if combined <= sizes.target || (short && combined <= sizes.max) {
                current = Some((s, seg_end));
                continue;
            }
            if short && seg_len > sizes.target {
                current = None;
                split(text, s, seg_end, level.finer(), next_cut, sizes, out);
                next_cut = Some(level);
                continue;
            }
            flush(&mut current, out, &mut next_cut);
        }
        if seg_len <= sizes.target {
            current = Some((seg_start, seg_end));
        } else {
            if seg_len <= sizes.max {
                out.push((seg_start, seg_end, next_cut));
            } else {
                split(
                    text,
                    seg_start,
                    seg_end,
                    level.finer(),
                    next_cut,
                    sizes,
                    out,
                );
            }
            next_cut = Some(level);
        }
    }
    flush(&mut current, out, &mut next_cut);
}

/// The last resort for text without any whitespace: windows of `target` characters.
fn hard_cut(
    text: &str,
    start: usize,
    end: usize,
    cut: Option<Level>,
    sizes: &Sizes,
    out: &mut Vec<(usize, usize, Option<Level>)>,
) {
    let mut piece_start = start;
    let mut count = 0;
    let mut cut = cut;
    for (offset, _) in text[start..end].char_indices() {
        if count == sizes.target {
            let (s, e) = trim(text, piece_start, start + offset);
            if s < e {
                out.push((s, e, cut));
                cut = Some(Level::Char);
            }
            piece_start = start + offset;
            count = 0;
        }
        count += 1;
    }
    let (s, e) = trim(text, piece_start, end);
    if s < e {
        out.push((s, e, cut));
    }
}

/// The natural units of `[start, end)` at `level`, in order; whitespace between them belongs
/// to no unit.
fn segments(text: &str, start: usize, end: usize, level: Level) -> Vec<(usize, usize)> {
    let slice = &text[start..end];
    let mut out = Vec::new();
    match level {
        Level::Paragraph => {
            let mut block: Option<(usize, usize)> = None;
            let mut offset = start;
            for line in slice.split_inclusive('\n') {
                let line_end = offset + line.len();
                if line.trim().is_empty() {
                    out.extend(block.take());
                } else {
                    block = Some((block.map_or(offset, |b| b.0), line_end));
                }
                offset = line_end;
            }
            out.extend(block);
        }
        Level::Line => {
            let mut offset = start;
            for line in slice.split_inclusive('\n') {
                out.push((offset, offset + line.len()));
                offset += line.len();
            }
        }
        Level::Sentence => {
            let mut seg_start = start;
            let mut chars = slice.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                let next = chars.peek().map(|&(_, n)| n);
                let ends = match c {
                    '.' | '!' | '?' | ';' | ':' => next.is_some_and(char::is_whitespace),
                    '。' | '！' | '？' | '；' => true,
                    _ => false,
                };
                if ends {
                    let seg_end = start + i + c.len_utf8();
                    out.push((seg_start, seg_end));
                    seg_start = seg_end;
                }
            }
            if seg_start < end {
                out.push((seg_start, end));
            }
        }
        Level::Word => {
            let mut seg_start: Option<usize> = None;
            for (i, c) in slice.char_indices() {
                match (c.is_whitespace(), seg_start) {
                    (true, Some(s)) => {
                        out.push((s, start + i));
                        seg_start = None;
                    }
                    (false, None) => seg_start = Some(start + i),
                    _ => {}
                }
            }
            out.extend(seg_start.map(|s| (s, end)));
        }
        Level::Char => out.push((start, end)),
    }
    out
}

/// Moves the start of a chunk cut mid-paragraph back by about `overlap` characters, to a word
/// start, without leaving its section or growing past `max`.
fn overlap_start(text: &str, floor: usize, start: usize, end: usize, sizes: &Sizes) -> usize {
    let room = sizes
        .max
        .saturating_sub(char_len(text, start, end))
        .min(sizes.overlap);
    if room == 0 || start <= floor {
        return start;
    }
    let before = &text[floor..start];
    let Some((back, _)) = before
        .char_indices()
        .rev()
        .nth(room - 1)
        .or_else(|| before.char_indices().next())
    else {
        return start;
    };
    let window = &before[back..];
    let candidate = match window.find(char::is_whitespace) {
        // Begin at the word after the first gap, so the overlap never opens mid-word.
        Some(gap) => back + gap,
        None if back == 0 => 0,
        None => return start,
    };
    let (trimmed, _) = trim(text, floor + candidate, start);
    if trimmed < start { trimmed } else { start }
}

fn trim(text: &str, start: usize, end: usize) -> (usize, usize) {
    let slice = &text[start..end];
    let without_lead = slice.trim_start();
    let s = start + (slice.len() - without_lead.len());
    let e = s + without_lead.trim_end().len();
    (s, e)
}

fn char_len(text: &str, start: usize, end: usize) -> usize {
    text[start..end].chars().count()
}

fn common_prefix(mut a: Vec<String>, b: &[String]) -> Vec<String> {
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    a.truncate(same);
    a
}
