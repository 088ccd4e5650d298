//! A server's event stream slots: at most `--max-streams` streams open, and
//! `--max-streams-per-principal` of one principal; a slot is taken before a stream's head
//! is written and given back when the stream ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Streams open or being opened (slots taken), in all and per principal.
#[derive(Debug)]
struct Taken {
    total: usize,
    per_principal: HashMap<String, usize>,
}

/// A stream's place among the `--max-streams` and its principal's
/// `--max-streams-per-principal`, held from before its head is written to its end.
#[derive(Debug)]
pub struct Slot {
    principal: String,
    taken: Arc<Mutex<Taken>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut slots = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        slots.total -= 1;
        if let Some(n) = slots.per_principal.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                slots.per_principal.remove(&self.principal);
            }
        }
    }
}

/// Why a stream got no slot.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    /// No stream may be open at all (`--max-streams 0`, or per principal 0).
    Off,
    /// `--max-streams` are open.
    Server,
    /// `--max-streams-per-principal` are open for this principal.
    Principal,
}

/// The caps (`--max-streams`, `--max-streams-per-principal`) and the slots taken.
#[derive(Debug)]
pub struct Slots {
    taken: Arc<Mutex<Taken>>,
    max: usize,
    per_principal: usize,
}

impl Slots {
    pub fn new(max: usize, per_principal: usize) -> Slots {
        Slots {
            taken: Arc::new(Mutex::new(Taken {
                total: 0,
                per_principal: HashMap::new(),
            })),
            max,
            per_principal,
        }
    }

    /// A slot for one more stream of `principal`, if both caps allow it.
    pub fn reserve(&self, principal: &str) -> Result<Slot, Full> {
        if self.max == 0 || self.per_principal == 0 {
            return Err(Full::Off);
        }
        let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        if taken.total >= self.max {
            return Err(Full::Server);
        }
        let mine = taken.per_principal.get(principal).copied().unwrap_or(0);
        if mine >= self.per_principal {
            return Err(Full::Principal);
        }
        taken.per_principal.insert(principal.to_owned(), mine + 1);
        taken.total += 1;
        Ok(Slot {
            principal: principal.to_owned(),
            taken: self.taken.clone(),
        })
    }
}
