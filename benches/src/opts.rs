//! Command-line options shared by every benchmark binary, and the output sink that prints
//! either GASNet's lines or CSV.

use std::io::Write as _;

use crate::record::Record;

/// Options every benchmark binary takes (flattened into each binary's clap parser).
#[derive(clap::Args, Debug, Clone)]
pub struct CommonOpts {
    /// Iterations per measurement (GASNet's `iters`).
    #[arg(short = 'i', long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: u64,
    /// Smallest message size of the sweeps (bytes; K/M/G suffixes allowed).
    #[arg(long, default_value = "0", value_parser = parse_size)]
    pub min_size: usize,
    /// Largest message size of the sweeps [default: the program's own maximum].
    #[arg(long, value_parser = parse_size)]
    pub max_size: Option<usize>,
    /// Bytes moved per size at most: large sizes run fewer iterations (never below
    /// --min-iters), so that sweeps to many MiB finish in seconds.
    #[arg(long, default_value = "32M", value_parser = parse_size)]
    pub byte_budget: usize,
    /// Fewest iterations of any size.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_iters: u64,
    /// Print CSV rows (`kind,section,...`) instead of GASNet's lines.
    #[arg(long)]
    pub csv: bool,
    /// Skip the raw baselines.
    #[arg(long)]
    pub no_baseline: bool,
    /// Round trips of each raw UDP ping-pong.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub raw_iters: u64,
    /// 1 MiB messages of the raw UDP stream.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(2..))]
    pub raw_stream_count: u64,
    /// Sections to run, by letter (GASNet's `test_sections`), e.g. `AB` [default: all].
    #[arg(long, value_parser = parse_sections)]
    pub sections: Option<String>,
    /// GASNet's positional arguments, `(iters) (maxsz) (test_sections)` (testbarrier:
    /// `(iters)`), so that scripts written for GASNet's tests run these unchanged; they take
    /// the place of `-i`, `--max-size` and `--sections`.
    #[arg(value_name = "ITERS [MAXSZ [SECTIONS]]", num_args = 0..=3)]
    pub positional: Vec<String>,
}

impl CommonOpts {
    /// The largest size to sweep: `--max-size` capped by the program's `limit`.
    pub fn max_size_or(&self, limit: usize) -> usize {
        self.max_size.map_or(limit, |m| m.min(limit))
    }

    /// Whether section `letter` is to run.
    pub fn section_enabled(&self, letter: char) -> bool {
        self.sections
            .as_deref()
            .is_none_or(|s| s.contains(letter.to_ascii_uppercase()))
    }

    /// The options with GASNet's positional arguments applied (at most `most` of them: 1 for
    /// testbarrier, 3 for the others), checked against each other.
    pub fn resolved(mut self, most: usize) -> Result<CommonOpts, OptsError> {
        let pos = std::mem::take(&mut self.positional);
        if pos.len() > most {
            return Err(OptsError::Positional {
                arg: pos[most].clone(),
                why: format!(
                    "this program takes at most {most} positional argument(s): {}",
                    ["(iters)", "(maxsz)", "(test_sections)"][..most].join(" ")
                ),
            });
        }
        let bad = |arg: &String, why: String| OptsError::Positional {
            arg: arg.clone(),
            why,
        };
        if let Some(a) = pos.first() {
            self.iters = match a.parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => return Err(bad(a, "(iters) must be a number above 0".into())),
            };
        }
        if let Some(a) = pos.get(1) {
            self.max_size = Some(parse_size(a).map_err(|w| bad(a, format!("(maxsz): {w}")))?);
        }
        if let Some(a) = pos.get(2) {
            self.sections =
                Some(parse_sections(a).map_err(|w| bad(a, format!("(test_sections): {w}")))?);
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks the options against each other: a typed error naming the options.
    pub fn validate(&self) -> Result<(), OptsError> {
        if let Some(max) = self.max_size {
            if self.min_size > max {
                return Err(OptsError::SizeRange {
                    min: self.min_size,
                    max,
                });
            }
        }
        Ok(())
    }
}

/// Options that are valid one by one but not together, or a bad positional argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptsError {
    /// A GASNet-style positional argument that is not what its place asks for.
    #[error("argument `{arg}`: {why}")]
    Positional {
        /// The argument.
        arg: String,
        /// What its place expects.
        why: String,
    },
    /// `--min-size` above `--max-size`.
    #[error("--min-size {min} is larger than --max-size {max}")]
    SizeRange {
        /// Smallest size given.
        min: usize,
        /// Largest size given.
        max: usize,
    },
}

/// Parses `4096`, `64K`, `1M`, `2G` (binary multiples).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1usize << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a size (a number with an optional K, M or G)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{s}` does not fit in this machine's address space"))
}

fn parse_sections(s: &str) -> Result<String, String> {
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(format!(
            "`{s}` is not a list of section letters such as `AB`"
        ));
    }
    Ok(s.to_ascii_uppercase())
}

/// Where a benchmark's records go: GASNet's lines, or CSV rows under one header.
#[derive(Debug)]
pub struct Out {
    csv: bool,
    header_done: bool,
    /// Only one rank prints, so that a job's output is one copy of the results.
    enabled: bool,
}

impl Out {
    /// A sink printing CSV when `csv`, GASNet's lines otherwise; silent unless `enabled`
    /// (pass `rank == 0`).
    pub fn new(csv: bool, enabled: bool) -> Out {
        Out {
            csv,
            header_done: false,
            enabled,
        }
    }

    /// Prints one record (flushed at once, so a job that dies still shows what it measured).
    pub fn record(&mut self, r: &Record) {
        let line = if self.csv {
            let mut s = String::new();
            if !self.header_done {
                s.push_str(Record::CSV_HEADER);
                s.push('\n');
                self.header_done = true;
            }
            s.push_str(&r.csv_row());
            s
        } else {
            r.gasnet_line()
        };
        self.line(&line);
    }

    /// Prints a text line (headers, ` max:` markers, summaries) in GASNet mode; nothing in
    /// CSV mode, where only rows go to standard output.
    pub fn text(&mut self, s: &str) {
        if !self.csv {
            self.line(s);
        }
    }

    fn line(&self, s: &str) {
        if !self.enabled {
            return;
        }
        let mut o = std::io::stdout().lock();
        // A closed stdout (the reader went away) must not abort a job midway; the ranks'
        // exit codes still tell the launcher how the run went.
        let _ = writeln!(o, "{s}");
        let _ = o.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        c: CommonOpts,
    }

    #[test]
    fn sizes_with_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q")
            .unwrap_err()
            .contains("`12Q` is not a size"));
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn options_parse_and_validate() {
        let t = T::try_parse_from([
            "x",
            "-i",
            "50",
            "--max-size",
            "64K",
            "--csv",
            "--sections",
            "ab",
        ])
        .unwrap();
        assert_eq!(t.c.iters, 50);
        assert_eq!(t.c.max_size, Some(65536));
        assert_eq!(t.c.max_size_or(1000), 1000);
        assert!(t.c.csv);
        assert!(t.c.section_enabled('A') && t.c.section_enabled('b') && !t.c.section_enabled('C'));
        assert_eq!(t.c.validate(), Ok(()));
        let t = T::try_parse_from(["x", "--min-size", "2M", "--max-size", "1M"]).unwrap();
        assert_eq!(
            t.c.validate(),
            Err(OptsError::SizeRange {
                min: 2 << 20,
                max: 1 << 20
            })
        );
        assert!(T::try_parse_from(["x", "-i", "0"]).is_err());
        assert!(T::try_parse_from(["x", "--sections", "A1"]).is_err());
        assert!(T::try_parse_from(["x", "--max-size", "lots"]).is_err());
        let t = T::try_parse_from(["x"]).unwrap();
        assert!(t.c.section_enabled('Z'));
        assert_eq!(t.c.byte_budget, 32 << 20);
    }
}
