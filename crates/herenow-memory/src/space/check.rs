//! The engine's invariants, checked from the outside in tests and in the
//! property test against a naive model.

use herenow_core::id::MemberKind;

use super::Space;
use super::entry::NIL;

impl Space {
    /// Checks the engine's internal invariants; panics with a description
    /// when one is broken. For tests.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        let mut seen = 0usize;
        for kind in MemberKind::ALL {
            let k = kind.index();
            let mut s = self.lists[k].head;
            let mut prev = NIL;
            let mut n = 0u32;
            while s != NIL {
                let e = &self.entries[s as usize];
                assert!(!e.is_free(), "free entry in list");
                assert_eq!(e.kind(), kind, "entry in the wrong list");
                assert_eq!(e.prev, prev, "broken back link");
                if prev != NIL {
                    assert!(
                        self.entries[prev as usize].key() > e.key(),
                        "list out of order"
                    );
                }
                assert_eq!(
                    self.find(kind, &e.id),
                    Some(s),
                    "index does not find a listed member"
                );
                prev = s;
                s = e.next;
                n += 1;
            }
            assert_eq!(self.lists[k].tail, prev, "wrong tail");
            assert_eq!(self.lists[k].len, n, "wrong length");
            seen += n as usize;
        }
        assert_eq!(self.index.len(), seen, "index and lists disagree");
        self.conns.check_invariants();
        self.check_blocks(seen);
    }
}
