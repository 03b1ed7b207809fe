//! The public active-message request calls.

use crate::client::Client;
use crate::error::AmError;
use crate::handlers::Category;
use crate::matchbits::Direction;

impl Client {
    /// Sends a Short request (arguments only) to run `handler` on `dest`.
    pub fn am_request_short(&self, dest: u32, handler: u8, args: &[u32]) -> Result<(), AmError> {
        self.inner.send_am(
            "am_request_short",
            dest,
            Direction::Request,
            Category::Short,
            handler,
            args,
            &[],
            None,
        )
    }

    /// Sends a Medium request: `payload` (at most [`crate::MAX_MEDIUM`] bytes) is delivered to
    /// the handler in a buffer valid for its call. The source buffer may be reused on return.
    pub fn am_request_medium(
        &self,
        dest: u32,
        handler: u8,
        args: &[u32],
        payload: &[u8],
    ) -> Result<(), AmError> {
        self.inner.send_am(
            "am_request_medium",
            dest,
            Direction::Request,
            Category::Medium,
            handler,
            args,
            payload,
            None,
        )
    }

    /// Sends a Long request: `payload` is placed at `dest_offset` of `dest`'s segment before
    /// the handler runs. The source buffer may be reused on return.
    pub fn am_request_long(
        &self,
        dest: u32,
        handler: u8,
        args: &[u32],
        payload: &[u8],
        dest_offset: u64,
    ) -> Result<(), AmError> {
        self.inner.send_am(
            "am_request_long",
            dest,
            Direction::Request,
            Category::Long,
            handler,
            args,
            payload,
            Some(dest_offset),
        )
    }
}
