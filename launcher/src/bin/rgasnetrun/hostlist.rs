//! Slurm host-list expressions (`SLURM_JOB_NODELIST`): `n[01-04,07],gpu7,rack[1-2]cn[1-2]`
//! expanded to host names in Slurm's order. Pure, unit-tested; the slurm spawner reads the
//! allocation's nodes through it instead of running `scontrol show hostnames`.

use anyhow::{bail, Result};

/// Most hosts one expression may expand to: far above any cluster, low enough that a typo
/// such as `n[1-999999999]` is an error instead of an out-of-memory.
const MAX_HOSTS: usize = 1 << 20;

/// Expands a host-list expression; `origin` names where it came from, for errors.
pub(crate) fn expand(text: &str, origin: &str) -> Result<Vec<String>> {
    let mut hosts = Vec::new();
    for entry in split_top_level(text, origin)? {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let mut names = vec![String::new()];
        let mut rest = entry;
        while !rest.is_empty() {
            match rest.find('[') {
                None => {
                    names.iter_mut().for_each(|n| n.push_str(rest));
                    rest = "";
                }
                Some(open) => {
                    let prefix = &rest[..open];
                    let Some(close) = rest[open..].find(']').map(|c| open + c) else {
                        bail!("{origin}={text:?}: '[' without ']' in {entry:?}");
                    };
                    let items = ranges(&rest[open + 1..close], origin, text)?;
                    if names
                        .len()
                        .saturating_mul(items.len())
                        .saturating_add(hosts.len())
                        > MAX_HOSTS
                    {
                        bail!("{origin}={text:?} names more than {MAX_HOSTS} hosts");
                    }
                    names = names
                        .iter()
                        .flat_map(|n| items.iter().map(move |i| format!("{n}{prefix}{i}")))
                        .collect();
                    rest = &rest[close + 1..];
                }
            }
        }
        hosts.extend(names);
    }
    if hosts.is_empty() {
        bail!("{origin}={text:?} names no host");
    }
    Ok(hosts)
}

/// Splits on the commas that are outside brackets.
fn split_top_level<'a>(text: &'a str, origin: &str) -> Result<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => bail!("{origin}={text:?}: nested '['"),
            ']' if depth == 1 => depth = 0,
            ']' => bail!("{origin}={text:?}: ']' without '['"),
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        bail!("{origin}={text:?}: '[' without ']'");
    }
    out.push(&text[start..]);
    Ok(out)
}

/// The items of one bracket: `1-3,07,10-11` with the low bound's zero padding kept.
fn ranges(inner: &str, origin: &str, text: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for part in inner.split(',') {
        let part = part.trim();
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            bail!("{origin}={text:?}: [{inner}] holds {part:?}, not a number or range");
        }
        let (Ok(a), Ok(b)) = (lo.parse::<u64>(), hi.parse::<u64>()) else {
            bail!("{origin}={text:?}: {part:?} is out of range");
        };
        if b < a {
            bail!("{origin}={text:?}: range {part:?} runs backwards");
        }
        if (b - a) as usize >= MAX_HOSTS {
            bail!("{origin}={text:?} names more than {MAX_HOSTS} hosts");
        }
        let width = lo.len();
        out.extend((a..=b).map(|v| format!("{v:0width$}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Vec<String> {
        expand(s, "SLURM_JOB_NODELIST").unwrap()
    }

    #[test]
    fn plain_names_and_lists() {
        assert_eq!(ok("vm"), ["vm"]);
        assert_eq!(ok("a,b.c,d-1"), ["a", "b.c", "d-1"]);
    }

    #[test]
    fn ranges_keep_padding_and_order() {
        assert_eq!(ok("n[01-03,07]"), ["n01", "n02", "n03", "n07"]);
        assert_eq!(ok("n[8-10],x"), ["n8", "n9", "n10", "x"]);
        assert_eq!(ok("cn[1-2]-ib"), ["cn1-ib", "cn2-ib"]);
        assert_eq!(
            ok("r[1-2]n[1-2]"),
            ["r1n1", "r1n2", "r2n1", "r2n2"],
            "several brackets expand as a product, the first varying slowest"
        );
    }

    #[test]
    fn malformed_expressions_are_errors_naming_the_variable() {
        for bad in [
            "",
            "n[1-3",
            "n]1[",
            "n[a-b]",
            "n[3-1]",
            "n[[1]]",
            "n[1-]",
            "n[1-99999999]",
        ] {
            let e = expand(bad, "SLURM_JOB_NODELIST").unwrap_err().to_string();
            assert!(e.contains("SLURM_JOB_NODELIST"), "{bad:?}: {e}");
        }
    }
}
