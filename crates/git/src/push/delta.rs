//! A git delta encoder: describe a target as copies from a base and
//! literal inserts, in the format pack entries use (gitformat-pack,
//! "Deltified representation").
//!
//! The base is indexed by a hash of each aligned 16-byte block; the target
//! is scanned with a rolling hash of the same width. A hit is checked byte
//! for byte, grown forwards as far as both agree and backwards into the
//! pending literal, and written as one copy. The encoder gives up as soon as
//! the delta would exceed the caller's limit, so a poor pairing costs little.

/// Width of the blocks the base is indexed by, and of the rolling window.
const BLOCK: usize = 16;
/// Candidate positions compared per target position, at most.
const MAX_CANDIDATES: usize = 32;
/// The largest copy one instruction carries here (git's format allows 24
/// bits with 0 meaning 0x10000; keeping below 0x10000 avoids that case).
const MAX_COPY: usize = 0xffff;
/// The largest literal one instruction carries.
const MAX_INSERT: usize = 0x7f;
/// Multiplier of the polynomial rolling hash.
const MUL: u32 = 0x0100_0193;

fn block_hash(block: &[u8]) -> u32 {
    block.iter().fold(0u32, |h, &b| {
        h.wrapping_mul(MUL).wrapping_add(u32::from(b) + 1)
    })
}

fn push_size(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn push_insert(out: &mut Vec<u8>, mut data: &[u8]) {
    while !data.is_empty() {
        let n = data.len().min(MAX_INSERT);
        out.push(n as u8);
        out.extend_from_slice(&data[..n]);
        data = &data[n..];
    }
}

fn push_copy(out: &mut Vec<u8>, mut offset: usize, mut len: usize) {
    while len > 0 {
        let n = len.min(MAX_COPY);
        let at = out.len();
        out.push(0x80);
        let mut op = 0x80u8;
        for k in 0..4 {
            let b = ((offset >> (8 * k)) & 0xff) as u8;
            if b != 0 {
                op |= 1 << k;
                out.push(b);
            }
        }
        for k in 0..2 {
            let b = ((n >> (8 * k)) & 0xff) as u8;
            if b != 0 {
                op |= 0x10 << k;
                out.push(b);
            }
        }
        out[at] = op;
        offset += n;
        len -= n;
    }
}

/// An index of a base: where each aligned block's hash occurs.
pub(crate) struct Index<'a> {
    base: &'a [u8],
    /// Bucket heads: 1 + block number, 0 for none.
    heads: Vec<u32>,
    /// Next block number in the same bucket (1 + number, 0 ends).
    next: Vec<u32>,
    shift: u32,
}

impl<'a> Index<'a> {
    /// Index `base`. Bases of 4 GiB or more are not indexed (every
    /// offset must fit the format's 32 bits); they yield no delta.
    pub(crate) fn new(base: &'a [u8]) -> Index<'a> {
        let blocks = if base.len() >= u32::MAX as usize {
            0
        } else {
            base.len() / BLOCK
        };
        let bits = (blocks.max(1).next_power_of_two().trailing_zeros()).clamp(4, 24);
        let mut heads = vec![0u32; 1 << bits];
        let mut next = vec![0u32; blocks];
        let shift = 32 - bits;
        // Later blocks first into each chain, so the earliest occurrence is
        // tried first (copies from the start of the base are shortest).
        for b in (0..blocks).rev() {
            let h = block_hash(&base[b * BLOCK..(b + 1) * BLOCK]);
            let bucket = (h.wrapping_mul(0x9e37_79b1) >> shift) as usize;
            next[b] = heads[bucket];
            heads[bucket] = b as u32 + 1;
        }
        Index {
            base,
            heads,
            next,
            shift,
        }
    }

    fn longest_match(&self, hash: u32, target: &[u8], at: usize) -> Option<(usize, usize)> {
        let bucket = (hash.wrapping_mul(0x9e37_79b1) >> self.shift) as usize;
        let mut cursor = self.heads[bucket];
        let mut best: Option<(usize, usize)> = None;
        let mut tried = 0;
        while cursor != 0 && tried < MAX_CANDIDATES {
            let b = (cursor - 1) as usize;
            cursor = self.next[b];
            tried += 1;
            let src = b * BLOCK;
            let len = self.base[src..]
                .iter()
                .zip(&target[at..])
                .take_while(|(x, y)| x == y)
                .count();
            if len >= BLOCK && best.is_none_or(|(_, l)| len > l) {
                best = Some((src, len));
            }
        }
        best
    }

    /// Encode `target` against the indexed base. `None` when the delta
    /// would be longer than `max_len` bytes.
    pub(crate) fn delta(&self, target: &[u8], max_len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity((target.len() / 8).min(max_len) + 16);
        push_size(&mut out, self.base.len());
        push_size(&mut out, target.len());
        let mut pending = 0; // start of the literal not yet written
        let mut i = 0;
        if self.next.is_empty() || target.len() < BLOCK {
            push_insert(&mut out, target);
            return (out.len() <= max_len).then_some(out);
        }
        let top = MUL.wrapping_pow(BLOCK as u32 - 1);
        let mut hash = block_hash(&target[..BLOCK]);
        while i + BLOCK <= target.len() {
            if let Some((mut src, mut len)) = self.longest_match(hash, target, i) {
                let mut t = i;
                while t > pending && src > 0 && self.base[src - 1] == target[t - 1] {
                    src -= 1;
                    t -= 1;
                    len += 1;
                }
                push_insert(&mut out, &target[pending..t]);
                push_copy(&mut out, src, len);
                if out.len() > max_len {
                    return None;
                }
                i = t + len;
                pending = i;
                if i + BLOCK <= target.len() {
                    hash = block_hash(&target[i..i + BLOCK]);
                }
                continue;
            }
            if i + BLOCK < target.len() {
                let gone = u32::from(target[i]) + 1;
                let come = u32::from(target[i + BLOCK]) + 1;
                hash = hash
                    .wrapping_sub(gone.wrapping_mul(top))
                    .wrapping_mul(MUL)
                    .wrapping_add(come);
            }
            i += 1;
            // A literal this long already: cheaper to give up than to go on.
            if out.len() + (i - pending) > max_len {
                return None;
            }
        }
        push_insert(&mut out, &target[pending..]);
        (out.len() <= max_len).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fetch side's reader of the format (the pack tests check the same
    /// deltas with git itself): what this encoder writes, it reads.
    fn apply(base: &[u8], delta: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        crate::fetch::apply::apply(base, delta, &mut out).expect("a valid delta");
        out
    }

    fn lines(n: usize, salt: &str) -> Vec<u8> {
        (0..n)
            .map(|i| format!("line {i} of a file that is edited a little {salt}\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn a_small_edit_is_a_small_delta() {
        let base = lines(400, "");
        let mut target = base.clone();
        let at = target.len() / 2;
        target.splice(at..at + 10, b"an edit in the middle".iter().copied());
        let d = Index::new(&base).delta(&target, usize::MAX).unwrap();
        assert!(d.len() < 64, "{} bytes", d.len());
        assert_eq!(apply(&base, &d), target);
    }

    #[test]
    fn the_limit_gives_up() {
        let base = lines(100, "a");
        let target: Vec<u8> = (0..4000u32).map(|i| (i * 7919 % 251) as u8).collect();
        assert!(Index::new(&base).delta(&target, target.len() / 2).is_none());
    }

    #[test]
    fn long_copies_and_literals_are_split() {
        let base: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let mut target = base[1000..].to_vec();
        target.extend((0..1000u32).map(|i| (i * 31) as u8));
        target.extend_from_slice(&base[..5000]);
        let d = Index::new(&base).delta(&target, usize::MAX).unwrap();
        assert_eq!(apply(&base, &d), target);
        assert!(d.len() < 1200, "{} bytes", d.len());
    }

    #[test]
    fn small_and_empty_inputs() {
        for (b, t) in [
            (&b""[..], &b""[..]),
            (b"", b"x"),
            (b"abc", b""),
            (b"short", b"short too"),
            (b"0123456789abcdef", b"0123456789abcdef"),
        ] {
            let d = Index::new(b).delta(t, usize::MAX).unwrap();
            assert_eq!(apply(b, &d), t);
        }
    }

    #[test]
    fn random_edits_round_trip() {
        // A fixed-seed generator: many shapes of edit, no new dependency.
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move |n: usize| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n.max(1) as u64) as usize
        };
        for round in 0..300 {
            let len = rnd(20_000);
            let alphabet = 2 + rnd(250);
            let base: Vec<u8> = (0..len).map(|_| rnd(alphabet) as u8).collect();
            let mut target = base.clone();
            for _ in 0..rnd(8) {
                let at = rnd(target.len() + 1);
                match rnd(3) {
                    0 => {
                        let n = rnd(200);
                        let ins: Vec<u8> = (0..n).map(|_| rnd(256) as u8).collect();
                        target.splice(at..at, ins);
                    }
                    1 => {
                        let end = (at + rnd(300)).min(target.len());
                        target.drain(at..end);
                    }
                    _ => {
                        let from = rnd(base.len() + 1);
                        let end = (from + rnd(500)).min(base.len());
                        let copy = base[from..end].to_vec();
                        target.splice(at..at, copy);
                    }
                }
            }
            let d = Index::new(&base).delta(&target, usize::MAX).unwrap();
            assert_eq!(apply(&base, &d), target, "round {round}");
        }
    }
}
