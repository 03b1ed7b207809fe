//! Helpers of the bootstrap backends that exchange through a process manager's collectives
//! (MPI, PMIx, PMI-2) instead of `rgasnetrun`'s server: the format in which a rank's pending
//! key-value puts travel at a fence, and the ranks that share a host name.

/// Serializes key-value pairs: for each, the key's and the value's length (u64, little endian)
/// before their bytes.
pub(crate) fn encode_puts(puts: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in puts {
        out.extend_from_slice(&(k.len() as u64).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&(v.len() as u64).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// Parses [`encode_puts`]'s format; `None` for bytes that are not in it.
pub(crate) fn decode_puts(mut buf: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    fn field<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
        let (len, rest) = buf.split_first_chunk::<8>()?;
        let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
        if rest.len() < len {
            return None;
        }
        let (f, rest) = rest.split_at(len);
        *buf = rest;
        Some(f)
    }
    let mut out = Vec::new();
    while !buf.is_empty() {
        let k = String::from_utf8(field(&mut buf)?.to_vec()).ok()?;
        let v = field(&mut buf)?.to_vec();
        out.push((k, v));
    }
    Some(out)
}

/// This machine's host name (empty if it cannot be read).
pub(crate) fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The ranks whose host name (in rank order in `hosts`) equals `mine`: the host ranks
/// `rgasnetrun` would have given them.
pub(crate) fn ranks_on_host(hosts: &[Vec<u8>], mine: &[u8]) -> Vec<u32> {
    hosts
        .iter()
        .enumerate()
        .filter(|(_, h)| h.as_slice() == mine)
        .map(|(r, _)| r as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_lists_round_trip_and_reject_garbage() {
        let puts = vec![("a".to_string(), vec![1, 2]), ("".to_string(), vec![])];
        assert_eq!(decode_puts(&encode_puts(&puts)), Some(puts));
        assert_eq!(decode_puts(&[1, 0, 0]), None);
        assert_eq!(decode_puts(&[9, 0, 0, 0, 0, 0, 0, 0, b'a']), None);
    }

    #[test]
    fn host_ranks_are_the_ranks_with_this_host_name() {
        let hosts = [b"a".to_vec(), b"b".to_vec(), b"a".to_vec()];
        assert_eq!(ranks_on_host(&hosts, b"a"), vec![0, 2]);
        assert_eq!(ranks_on_host(&hosts, b"b"), vec![1]);
    }
}
