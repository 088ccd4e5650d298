//! The random bits of the identifiers a server makes: event ids (and so `webhook-id`s,
//! `store/ids.rs`), and, drawn by test control, tokens minted at run time, their public
//! ids, snapshot and fault ids. They come from the operating system, or, with
//! `--test-seed N` (docs/control.md, "Same run, same bytes"), from generators seeded with
//! N, one per server (`Random`, given to the store when it opens and to test control),
//! never a global: two servers in one process draw apart.
use std::sync::{Arc, Mutex};

/// What a seeded draw is for. Each has a generator of its own, so that the ids of one
/// kind do not move when a test adds requests of another (a snapshot does not change
/// the next event id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Event ids (the writer thread's).
    Events = 0,
    /// Tokens minted at run time and their public ids.
    Tokens = 1,
    /// Test control's own ids: snapshots, faults, a fault's seed when none is given.
    Control = 2,
}

const STREAMS: usize = 3;

/// Where a server's ids come from: the operating system (the default), or generators
/// seeded with `--test-seed`. Cheap to clone; clones share the generators.
#[derive(Clone, Default)]
pub struct Random(Option<Arc<Seeded>>);

/// The generators' states now, and as they were when the server began listening.
struct Seeded {
    now: Mutex<[u64; STREAMS]>,
    start: Mutex<[u64; STREAMS]>,
    /// The restarts so far (resets): mixed into the event ids' generator at each, so
    /// that event ids never repeat (`restart`).
    restarts: Mutex<u64>,
}

impl Random {
    /// Generators seeded with `seed`, or the operating system's randomness for `None`.
    pub fn new(seed: Option<u64>) -> Random {
        Random(seed.map(|seed| {
            // Each stream's generator starts from the seed mixed with the stream's number.
            let states = std::array::from_fn(|i| {
                let mut s = seed ^ (i as u64).wrapping_mul(0xd1b5_4a32_d192_ed03);
                splitmix64(&mut s)
            });
            Arc::new(Seeded {
                now: Mutex::new(states),
                start: Mutex::new(states),
                restarts: Mutex::new(0),
            })
        }))
    }

    /// Whether the ids are drawn from seeded generators.
    pub fn seeded(&self) -> bool {
        self.0.is_some()
    }

    /// Remembers the generators' states as they are now: where `restart` takes them back
    /// (a server keeps them as it begins to listen, after its seed file is loaded).
    pub fn mark_start(&self) {
        if let Some(s) = &self.0 {
            // One lock at a time: the states are copied out first.
            let now = *lock(&s.now);
            *lock(&s.start) = now;
        }
    }

    /// Moves `stream`'s generator by `made`, what the store already holds (the events it
    /// has ever appended, `store::Store::open`): a store that starts empty (`made` 0)
    /// draws as any other with the seed, one that kept an earlier run's ids draws anew,
    /// since the ids it holds were drawn under a smaller `made`.
    pub fn vary(&self, stream: Stream, made: u64) {
        let Some(s) = &self.0 else { return };
        if made == 0 {
            return;
        }
        let mut now = lock(&s.now);
        mix(&mut now[stream as usize], made);
        let varied = *now;
        drop(now);
        *lock(&s.start) = varied;
    }

    /// The generators back at the states `mark_start` kept (`POST /_control/reset`), but
    /// for the event ids': theirs is that state mixed with the number of restarts, so that
    /// the tests between two resets draw the same ids run after run, and an event id never
    /// comes again (a receiver that drops a `webhook-id` it has seen loses no event).
    pub fn restart(&self) {
        if let Some(s) = &self.0 {
            let mut start = *lock(&s.start);
            let restarts = {
                let mut n = lock(&s.restarts);
                *n += 1;
                *n
            };
            mix(
                &mut start[Stream::Events as usize],
                restarts.rotate_left(32),
            );
            *lock(&s.now) = start;
        }
    }

    /// Fills `bytes` with random bits for `stream`.
    pub fn fill(&self, stream: Stream, bytes: &mut [u8]) -> Result<(), getrandom::Error> {
        match &self.0 {
            None => getrandom::fill(bytes),
            Some(s) => {
                let mut now = lock(&s.now);
                let state = &mut now[stream as usize];
                for chunk in bytes.chunks_mut(8) {
                    let word = splitmix64(state).to_le_bytes();
                    chunk.copy_from_slice(&word[..chunk.len()]);
                }
                Ok(())
            }
        }
    }

    /// `N` random bytes for `stream`, as `2 N` lowercase hex digits.
    pub fn hex<const N: usize>(&self, stream: Stream) -> Result<String, getrandom::Error> {
        let mut bytes = [0u8; N];
        self.fill(stream, &mut bytes)?;
        Ok(hex(&bytes))
    }
}

/// Lowercase hex digits of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for &b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
    out
}

/// A generator's state moved to another, by `by` (not 0): one no number of draws from
/// the first reaches in practice.
fn mix(state: &mut u64, by: u64) {
    let mut mixed = *state ^ by.wrapping_mul(0xa076_1d64_78bd_642f);
    *state = splitmix64(&mut mixed);
}

/// SplitMix64 (Steele, Lea and Flood 2014): one step of the state and its output. Not
/// for secrets: a seeded server's tokens are as guessable as its seed.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_gives_the_published_sequence() {
        // The reference implementation's first outputs for seed 1234567.
        let mut s = 1_234_567;
        let out: Vec<u64> = (0..3).map(|_| splitmix64(&mut s)).collect();
        assert_eq!(
            out,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
    }

    #[test]
    fn a_seed_repeats_a_restart_repeats_and_streams_are_apart() {
        let (a, b, c) = (
            Random::new(Some(7)),
            Random::new(Some(7)),
            Random::new(Some(8)),
        );
        a.mark_start();
        let first = a.hex::<32>(Stream::Tokens).unwrap();
        assert_eq!(first, b.hex::<32>(Stream::Tokens).unwrap());
        assert_ne!(first, c.hex::<32>(Stream::Tokens).unwrap());
        // Another stream's draws do not move this one.
        let _ = a.hex::<8>(Stream::Control).unwrap();
        assert_eq!(
            a.hex::<4>(Stream::Tokens).unwrap(),
            b.hex::<4>(Stream::Tokens).unwrap()
        );
        let event = a.hex::<16>(Stream::Events).unwrap();
        a.restart();
        assert_eq!(a.hex::<32>(Stream::Tokens).unwrap(), first);
        // Event ids are never drawn again: each restart mixes in its number, the same
        // way for every server with the seed.
        let again = a.hex::<16>(Stream::Events).unwrap();
        assert_ne!(again, event);
        b.restart();
        assert_eq!(b.hex::<16>(Stream::Events).unwrap(), again);
        a.restart();
        let third = a.hex::<16>(Stream::Events).unwrap();
        assert!(third != event && third != again);
        assert_ne!(
            a.hex::<16>(Stream::Events).unwrap(),
            a.hex::<16>(Stream::Tokens).unwrap()
        );
        // Varied by what a store holds: nothing moves for an empty one, another draw else.
        let (d, e, f) = (
            Random::new(Some(7)),
            Random::new(Some(7)),
            Random::new(Some(7)),
        );
        d.vary(Stream::Events, 0);
        e.vary(Stream::Events, 2);
        let fresh = f.hex::<16>(Stream::Events).unwrap();
        assert_eq!(d.hex::<16>(Stream::Events).unwrap(), fresh);
        assert_ne!(e.hex::<16>(Stream::Events).unwrap(), fresh);
        e.restart();
        assert_ne!(e.hex::<16>(Stream::Events).unwrap(), fresh);
        // Unseeded: the operating system's bits, all different.
        let os = Random::default();
        assert!(!os.seeded());
        assert_ne!(
            os.hex::<16>(Stream::Events).unwrap(),
            os.hex::<16>(Stream::Events).unwrap()
        );
    }
}
