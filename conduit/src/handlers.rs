//! The handler table: which function runs for which handler index, with the category and
//! argument count it was registered for, so that a mismatched call is caught at the initiator.
//!
//! Indices 0–127 belong to rgasnet itself (extended API, barrier, exit); 128–255 to the client.
//! Every rank of a job registers the same table (attach is collective), so the initiator's own
//! table tells what the target expects.

use std::sync::Arc;

use crate::token::Token;

/// First handler index available to clients.
pub const CLIENT_FIRST: u8 = 128;

/// The category of an active message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Arguments only.
    Short,
    /// Arguments plus a payload delivered into a buffer valid for the handler's call.
    Medium,
    /// Arguments plus a payload placed in the target's segment before the handler runs.
    Long,
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Category::Short => "Short",
            Category::Medium => "Medium",
            Category::Long => "Long",
        })
    }
}

/// The function a handler runs: the token (source rank, reply methods), the 32-bit arguments and
/// the payload (empty for Short; for Long, the bytes now in the segment at
/// [`Token::long_offset`]).
pub type HandlerFn = Arc<dyn Fn(&Token<'_>, &[u32], &[u8]) + Send + Sync>;

/// One handler to register.
#[derive(Clone)]
pub struct Handler {
    /// Index: `Some(128..=255)` for a fixed one, `None` to have one assigned.
    pub index: Option<u8>,
    /// Category it is called for.
    pub category: Category,
    /// Exact number of arguments (0..=16), or `None` to accept any.
    pub argc: Option<u8>,
    /// Name for diagnostics.
    pub name: String,
    /// The function.
    pub func: HandlerFn,
}

impl Handler {
    /// A handler with an assigned index that accepts any argument count.
    pub fn new(
        name: impl Into<String>,
        category: Category,
        func: impl Fn(&Token<'_>, &[u32], &[u8]) + Send + Sync + 'static,
    ) -> Handler {
        Handler {
            index: None,
            category,
            argc: None,
            name: name.into(),
            func: Arc::new(func),
        }
    }

    /// Fixes the handler's index.
    pub fn at(mut self, index: u8) -> Handler {
        self.index = Some(index);
        self
    }

    /// Fixes the number of arguments the handler takes.
    pub fn with_argc(mut self, argc: u8) -> Handler {
        self.argc = Some(argc);
        self
    }
}

/// A registration that cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The index is below 128 (reserved for rgasnet).
    #[error("handler `{name}`: index {index} is reserved for rgasnet; clients use 128-255")]
    Reserved {
        /// Handler name.
        name: String,
        /// Index asked for.
        index: u8,
    },
    /// Two handlers asked for the same index.
    #[error("handler `{name}`: index {index} is already taken by `{other}`")]
    Taken {
        /// Handler name.
        name: String,
        /// Index asked for.
        index: u8,
        /// The handler holding it.
        other: String,
    },
    /// An internal handler without a fixed index below 128.
    #[error("internal handler `{name}` needs a fixed index below 128, got {index:?}")]
    NotReserved {
        /// Handler name.
        name: String,
        /// Index given.
        index: Option<u8>,
    },
    /// More than 128 client handlers.
    #[error("handler `{name}`: all 128 client handler indices are taken")]
    Full {
        /// Handler name.
        name: String,
    },
    /// An argument count above 16.
    #[error("handler `{name}`: {argc} arguments exceed the maximum of 16")]
    TooManyArgs {
        /// Handler name.
        name: String,
        /// Count asked for.
        argc: u8,
    },
}

/// A registered handler.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) category: Category,
    pub(crate) argc: Option<u8>,
    pub(crate) name: String,
    pub(crate) func: HandlerFn,
}

/// The 256-entry table, and the open handler that takes every index without an entry.
#[derive(Clone)]
pub(crate) struct HandlerTable {
    entries: Vec<Option<Entry>>,
    open: Option<crate::client::OpenHandlerFn>,
}

impl HandlerTable {
    pub(crate) fn new() -> Self {
        HandlerTable {
            entries: vec![None; 256],
            open: None,
        }
    }

    /// Sends to and messages for indices without an entry go to `open`.
    pub(crate) fn set_open(&mut self, open: crate::client::OpenHandlerFn) {
        self.open = Some(open);
    }

    /// The open handler, if one was set.
    pub(crate) fn open(&self) -> Option<&crate::client::OpenHandlerFn> {
        self.open.as_ref()
    }

    /// Registers rgasnet's own handlers at their fixed reserved indices (0–127).
    pub(crate) fn register_reserved(
        &mut self,
        handlers: Vec<Handler>,
    ) -> Result<(), RegisterError> {
        for h in handlers {
            let index = match h.index {
                Some(i) if i < CLIENT_FIRST => i,
                other => {
                    return Err(RegisterError::NotReserved {
                        name: h.name.clone(),
                        index: other,
                    })
                }
            };
            if let Some(other) = &self.entries[usize::from(index)] {
                return Err(RegisterError::Taken {
                    name: h.name.clone(),
                    index,
                    other: other.name.clone(),
                });
            }
            self.set(index, &h);
        }
        Ok(())
    }

    /// Registers client handlers: fixed indices first, then assigned ones in order. Returns the
    /// index of each handler, in the order given.
    pub(crate) fn register_client(
        &mut self,
        handlers: Vec<Handler>,
    ) -> Result<Vec<u8>, RegisterError> {
        let mut result = vec![0u8; handlers.len()];
        for (i, h) in handlers.iter().enumerate() {
            if h.argc.is_some_and(|a| a > 16) {
                return Err(RegisterError::TooManyArgs {
                    name: h.name.clone(),
                    argc: h.argc.unwrap_or(0),
                });
            }
            if let Some(index) = h.index {
                if index < CLIENT_FIRST {
                    return Err(RegisterError::Reserved {
                        name: h.name.clone(),
                        index,
                    });
                }
                if let Some(other) = &self.entries[usize::from(index)] {
                    return Err(RegisterError::Taken {
                        name: h.name.clone(),
                        index,
                        other: other.name.clone(),
                    });
                }
                self.set(index, h);
                result[i] = index;
            }
        }
        for (i, h) in handlers.iter().enumerate() {
            if h.index.is_none() {
                let free = (CLIENT_FIRST..=255).find(|&x| self.entries[usize::from(x)].is_none());
                let Some(index) = free else {
                    return Err(RegisterError::Full {
                        name: h.name.clone(),
                    });
                };
                self.set(index, h);
                result[i] = index;
            }
        }
        Ok(result)
    }

    fn set(&mut self, index: u8, h: &Handler) {
        self.entries[usize::from(index)] = Some(Entry {
            category: h.category,
            argc: h.argc,
            name: h.name.clone(),
            func: h.func.clone(),
        });
    }

    pub(crate) fn get(&self, index: u8) -> Option<&Entry> {
        self.entries[usize::from(index)].as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str) -> Handler {
        Handler::new(name, Category::Short, |_, _, _| {})
    }

    #[test]
    fn fixed_then_assigned() {
        let mut t = HandlerTable::new();
        let idx = t
            .register_client(vec![h("a"), h("b").at(128), h("c").at(200)])
            .unwrap();
        assert_eq!(idx, vec![129, 128, 200]);
        assert_eq!(t.get(129).unwrap().name, "a");
        assert!(t.get(130).is_none());
    }

    #[test]
    fn errors() {
        let mut t = HandlerTable::new();
        assert_eq!(
            t.register_client(vec![h("x").at(5)]).err(),
            Some(RegisterError::Reserved {
                name: "x".into(),
                index: 5
            })
        );
        t.register_client(vec![h("y").at(140)]).unwrap();
        assert!(matches!(
            t.register_client(vec![h("z").at(140)]),
            Err(RegisterError::Taken { index: 140, .. })
        ));
        assert!(matches!(
            t.register_client(vec![h("w").with_argc(17)]),
            Err(RegisterError::TooManyArgs { argc: 17, .. })
        ));
        let many: Vec<Handler> = (0..128).map(|i| h(&format!("h{i}"))).collect();
        assert!(matches!(
            t.register_client(many),
            Err(RegisterError::Full { .. })
        ));
    }
}
