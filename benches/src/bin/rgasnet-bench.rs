//! `rgasnet-bench`: the benchmark suite's driver. `rgasnet-bench compare` runs testam,
//! testsmall, testlarge and testbarrier over every rgasnet path of this host (and an
//! installed GASNet with `--gasnet DIR`), repeats them, and writes a Markdown table, CSV,
//! JSON and plots (see `rgasnet_bench::compare`).

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use rgasnet_bench::compare::{compare, runner, CompareArgs};

/// rgasnet's benchmark driver.
#[derive(Parser, Debug)]
#[command(name = "rgasnet-bench", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the suite over every path (and peers), repeat, summarise and plot.
    Compare(CompareArgs),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Compare(args) => {
            // Before any thread starts: a stopped comparison stops its running job too.
            runner::forward_termination().context("setting up signal handling")?;
            let out = compare(&args)?;
            print!("{}", out.markdown);
            eprintln!("wrote:");
            for f in &out.files {
                eprintln!("  {}", f.display());
            }
        }
    }
    Ok(())
}
