//! The token a handler receives: who sent the message, whether it is a request, where a Long
//! payload landed, and the one reply a request handler may send.

use std::cell::Cell;

use crate::client::Inner;
use crate::error::AmError;
use crate::handlers::Category;
use crate::matchbits::Direction;

/// Passed to every handler. A request handler may reply once through it; a reply handler may
/// not send at all. Both rules are checked and reported as [`AmError`]s.
pub struct Token<'a> {
    pub(crate) client: &'a Inner,
    pub(crate) source: u32,
    pub(crate) direction: Direction,
    pub(crate) long_offset: Option<u64>,
    pub(crate) handler: u8,
    pub(crate) replied: Cell<bool>,
}

impl Token<'_> {
    /// The rank that sent the message.
    pub fn source(&self) -> u32 {
        self.source
    }

    /// Whether the message is a request (a reply otherwise).
    pub fn is_request(&self) -> bool {
        self.direction == Direction::Request
    }

    /// The handler index the message named.
    pub fn handler(&self) -> u8 {
        self.handler
    }

    /// For a Long message, the offset in this rank's segment where the payload was placed.
    pub fn long_offset(&self) -> Option<u64> {
        self.long_offset
    }

    fn claim_reply(&self) -> Result<(), AmError> {
        if self.direction == Direction::Reply {
            return Err(AmError::ReplyFromReply);
        }
        if self.replied.replace(true) {
            return Err(AmError::AlreadyReplied);
        }
        Ok(())
    }

    fn reply(
        &self,
        call: &'static str,
        category: Category,
        handler: u8,
        args: &[u32],
        payload: &[u8],
        long_offset: Option<u64>,
    ) -> Result<(), AmError> {
        self.claim_reply()?;
        let r = self.client.send_am(
            call,
            self.source,
            Direction::Reply,
            category,
            handler,
            args,
            payload,
            long_offset,
        );
        if r.is_err() {
            // Nothing was sent: the handler may still reply another way.
            self.replied.set(false);
        }
        r
    }

    /// Replies with a Short AM.
    pub fn reply_short(&self, handler: u8, args: &[u32]) -> Result<(), AmError> {
        self.reply("reply_short", Category::Short, handler, args, &[], None)
    }

    /// Replies with a Medium AM.
    pub fn reply_medium(&self, handler: u8, args: &[u32], payload: &[u8]) -> Result<(), AmError> {
        self.reply(
            "reply_medium",
            Category::Medium,
            handler,
            args,
            payload,
            None,
        )
    }

    /// Replies with a Long AM whose payload is placed at `dest_offset` of the requester's
    /// segment.
    pub fn reply_long(
        &self,
        handler: u8,
        args: &[u32],
        payload: &[u8],
        dest_offset: u64,
    ) -> Result<(), AmError> {
        self.reply(
            "reply_long",
            Category::Long,
            handler,
            args,
            payload,
            Some(dest_offset),
        )
    }
}
