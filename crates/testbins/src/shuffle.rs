//! A deterministic shuffle (splitmix64) shared by the ledger tests and
//! their child processes, so a failing seed can be replayed.

/// splitmix64's mixing step.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `0..n` in an order given by `seed`.
pub fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    for i in (1..v.len()).rev() {
        let j =
            (mix(seed.wrapping_mul(1_000_003).wrapping_add(i as u64)) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}
