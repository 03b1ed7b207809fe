//! Turning the command line and GASNet's environment variables into a job plan: hosts, rank
//! placement, program check, the mpirun template. Pure functions, unit-tested.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Which spawner starts the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Spawner {
    /// Fork/exec every rank on this host.
    Local,
    /// One `ssh` per host runs an `rgasnetrun` agent that starts that host's ranks.
    Ssh,
    /// Inside a Slurm allocation: one `srun` step runs an `rgasnetrun` agent on each node,
    /// which starts that node's ranks (as the ssh spawner's agents do).
    Slurm,
    /// Run the job under `mpirun`; ranks bootstrap through MPI.
    Mpi,
}

impl Spawner {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Spawner::Local => "local",
            Spawner::Ssh => "ssh",
            Spawner::Slurm => "slurm",
            Spawner::Mpi => "mpi",
        }
    }

    /// Parses `GASNET_SPAWNFN` (GASNet's letters, or the long names).
    pub(crate) fn from_spawnfn(v: &str) -> Result<Spawner> {
        match v.trim().to_ascii_lowercase().as_str() {
            "l" | "local" => Ok(Spawner::Local),
            "s" | "ssh" => Ok(Spawner::Ssh),
            "m" | "mpi" => Ok(Spawner::Mpi),
            "slurm" | "pmi" => Ok(Spawner::Slurm),
            _ => bail!(
                "GASNET_SPAWNFN={v:?} is not a spawner; use L (local), S (ssh), M (mpi) or slurm"
            ),
        }
    }

    /// Parses GASNet-EX's `GASNET_SPAWNER` (`ssh`, `mpi`, `pmi`; also `local`, `slurm`).
    pub(crate) fn from_spawner_var(v: &str) -> Result<Spawner> {
        match v.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(Spawner::Local),
            "ssh" => Ok(Spawner::Ssh),
            "mpi" => Ok(Spawner::Mpi),
            "pmi" | "slurm" => Ok(Spawner::Slurm),
            _ => bail!("GASNET_SPAWNER={v:?} is not a spawner; use local, ssh, mpi or pmi (srun)"),
        }
    }
}

/// Checks a host name so that it cannot be taken for an ssh option or hide shell syntax.
pub(crate) fn check_host(h: &str, origin: &str) -> Result<()> {
    let ok = !h.is_empty()
        && !h.starts_with('-')
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_:@[]".contains(c));
    if !ok {
        bail!("{origin}: {h:?} is not a valid host name (letters, digits, '.', '-', '_', ':', '@' only)");
    }
    Ok(())
}

/// Splits a host list given on the command line or in `GASNET_SSH_SERVERS` (commas, spaces or
/// newlines).
pub(crate) fn parse_host_list(text: &str, origin: &str) -> Result<Vec<String>> {
    let hosts: Vec<String> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    for h in &hosts {
        check_host(h, origin)?;
    }
    Ok(hosts)
}

/// Parses a hostfile: one host per line, `#` starts a comment, blank lines are skipped.
pub(crate) fn parse_hostfile(text: &str, path: &Path) -> Result<Vec<String>> {
    let mut hosts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let host = words.next().unwrap_or("");
        if let Some(extra) = words.next() {
            bail!(
                "hostfile {}: line {}: unexpected {extra:?} after the host name (one host per line)",
                path.display(),
                i + 1
            );
        }
        check_host(host, &format!("hostfile {} line {}", path.display(), i + 1))?;
        hosts.push(host.to_string());
    }
    if hosts.is_empty() {
        bail!("hostfile {} names no host", path.display());
    }
    Ok(hosts)
}

/// Block distribution: `ranks` over `hosts` hosts, the first `ranks % hosts` hosts get one more.
/// Returns the first rank and the count of each host.
pub(crate) fn block_distribution(ranks: u32, hosts: u32) -> Vec<(u32, u32)> {
    let base = ranks / hosts;
    let extra = ranks % hosts;
    let mut first = 0;
    (0..hosts)
        .map(|h| {
            let count = base + u32::from(h < extra);
            let r = (first, count);
            first += count;
            r
        })
        .collect()
}

/// Chooses the hosts of an ssh job: `-N` of them if given (error if the list is shorter),
/// otherwise as many as there are ranks, at most the whole list.
pub(crate) fn select_hosts(all: &[String], nodes: Option<u32>, ranks: u32) -> Result<Vec<String>> {
    if all.is_empty() {
        bail!("the ssh spawner needs hosts: give --hosts h1,h2, --hostfile FILE or set GASNET_SSH_SERVERS");
    }
    let n = match nodes {
        Some(0) => bail!("-N 0: a job needs at least one node"),
        Some(n) if n as usize > all.len() => bail!(
            "-N {n} asks for {n} nodes but only {} host(s) are given ({}); add hosts or lower -N",
            all.len(),
            all.join(",")
        ),
        Some(n) if n > ranks => bail!("-N {n} is more nodes than ranks (-n {ranks}); lower -N"),
        Some(n) => n as usize,
        None => all.len().min(ranks as usize),
    };
    Ok(all[..n].to_vec())
}

/// Finds the program to run: a path containing `/` is checked as given, a bare name is
/// searched in `path_var` (normally `$PATH`). The result must be an executable file.
pub(crate) fn resolve_program(prog: &Path, path_var: Option<&OsString>) -> Result<PathBuf> {
    let check = |p: &Path| -> Result<PathBuf> {
        let meta = std::fs::metadata(p)
            .with_context(|| format!("program {} cannot be run: it does not exist", p.display()))?;
        if !meta.is_file() {
            bail!(
                "program {} cannot be run: it is not a regular file",
                p.display()
            );
        }
        if meta.permissions().mode() & 0o111 == 0 {
            bail!(
                "program {} cannot be run: it is not executable (chmod +x {})",
                p.display(),
                p.display()
            );
        }
        Ok(p.to_path_buf())
    };
    if prog.as_os_str().is_empty() {
        bail!("the program name is empty");
    }
    if prog.to_string_lossy().contains('/') {
        return check(prog);
    }
    if let Some(path) = path_var {
        for dir in std::env::split_paths(path) {
            let cand = dir.join(prog);
            if cand.is_file() {
                return check(&cand);
            }
        }
    }
    bail!(
        "program {} not found in PATH; give its path (e.g. ./{})",
        prog.display(),
        prog.display()
    )
}

/// What an MPIRUN_CMD template is filled with.
pub(crate) struct TemplateArgs<'a> {
    pub(crate) ranks: u32,
    pub(crate) nodes: u32,
    pub(crate) program: &'a str,
    pub(crate) args: &'a [String],
    pub(crate) hostfile: Option<&'a str>,
}

/// Expands an `MPIRUN_CMD` template into argv words. A word that is exactly `%A` or `%C`
/// expands to several words; elsewhere placeholders are substituted inside the word.
pub(crate) fn expand_template(template: &str, t: &TemplateArgs<'_>) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut saw_n = false;
    let mut saw_prog = false;
    for word in template.split_whitespace() {
        match word {
            "%A" => {
                out.extend(t.args.iter().cloned());
                continue;
            }
            "%C" => {
                saw_prog = true;
                out.push(t.program.to_string());
                out.extend(t.args.iter().cloned());
                continue;
            }
            _ => {}
        }
        let mut w = String::new();
        let mut chars = word.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                w.push(c);
                continue;
            }
            match chars.next() {
                Some('N') => {
                    saw_n = true;
                    w.push_str(&t.ranks.to_string());
                }
                Some('M') => w.push_str(&t.nodes.to_string()),
                Some('P') => {
                    saw_prog = true;
                    w.push_str(t.program);
                }
                Some('A') => w.push_str(&t.args.join(" ")),
                Some('C') => {
                    saw_prog = true;
                    w.push_str(t.program);
                    for a in t.args {
                        w.push(' ');
                        w.push_str(a);
                    }
                }
                Some('H') => match t.hostfile {
                    Some(h) => w.push_str(h),
                    None => bail!(
                        "MPIRUN_CMD uses %H but no hosts were given; add --hosts/--hostfile or remove %H"
                    ),
                },
                Some('%') => w.push('%'),
                Some(other) => bail!(
                    "MPIRUN_CMD template {template:?} has unknown placeholder %{other}; known: %N %P %A %C %M %H %%"
                ),
                None => bail!("MPIRUN_CMD template {template:?} ends with a lone '%'"),
            }
        }
        out.push(w);
    }
    if !saw_n || !saw_prog {
        bail!("MPIRUN_CMD template {template:?} must contain %N and %C (or %P); e.g. \"mpirun -np %N %C\"");
    }
    Ok(out)
}

/// Quotes a word for a POSIX shell (the remote side of ssh runs one).
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_distribution_spreads_the_remainder_first() {
        assert_eq!(block_distribution(4, 2), vec![(0, 2), (2, 2)]);
        assert_eq!(block_distribution(5, 2), vec![(0, 3), (3, 2)]);
        assert_eq!(block_distribution(3, 3), vec![(0, 1), (1, 1), (2, 1)]);
        assert_eq!(block_distribution(7, 1), vec![(0, 7)]);
    }

    #[test]
    fn host_selection_checks_n() {
        let hosts: Vec<String> = vec!["a".into(), "b".into()];
        assert_eq!(select_hosts(&hosts, None, 4).unwrap(), hosts);
        assert_eq!(
            select_hosts(&hosts, None, 1).unwrap(),
            vec!["a".to_string()]
        );
        assert_eq!(
            select_hosts(&hosts, Some(1), 4).unwrap(),
            vec!["a".to_string()]
        );
        let e = select_hosts(&hosts, Some(3), 4).unwrap_err().to_string();
        assert!(e.contains("-N 3") && e.contains("only 2 host"), "{e}");
        assert!(select_hosts(&[], None, 1)
            .unwrap_err()
            .to_string()
            .contains("needs hosts"));
        assert!(select_hosts(&hosts, Some(2), 1).is_err());
    }

    #[test]
    fn hostfiles_and_host_lists() {
        let p = Path::new("hf");
        assert_eq!(
            parse_hostfile("# cluster\nnode1\n\n  node2  # fast\n", p).unwrap(),
            vec!["node1".to_string(), "node2".to_string()]
        );
        let e = parse_hostfile("node1\nnode2 slots=4\n", p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("slots=4"), "{e}");
        assert!(parse_hostfile("# nothing\n", p).is_err());
        assert!(parse_hostfile("-oProxyCommand=x\n", p).is_err());
        assert_eq!(
            parse_host_list("a,b c\nd", "--hosts").unwrap(),
            vec!["a", "b", "c", "d"]
        );
        assert!(parse_host_list("a;rm", "--hosts").is_err());
    }

    #[test]
    fn mpirun_templates_expand_and_reject_unknown_placeholders() {
        let args = vec!["x y".to_string(), "-z".to_string()];
        let t = TemplateArgs {
            ranks: 4,
            nodes: 2,
            program: "/bin/prog",
            args: &args,
            hostfile: Some("/tmp/h"),
        };
        assert_eq!(
            expand_template("mpirun -np %N --hostfile %H %C", &t).unwrap(),
            vec![
                "mpirun",
                "-np",
                "4",
                "--hostfile",
                "/tmp/h",
                "/bin/prog",
                "x y",
                "-z"
            ]
        );
        assert_eq!(
            expand_template("run -n%N -N %M %P %A 100%%", &t).unwrap(),
            vec!["run", "-n4", "-N", "2", "/bin/prog", "x y", "-z", "100%"]
        );
        let e = expand_template("mpirun -np %N %Q %C", &t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("%Q"), "{e}");
        assert!(expand_template("mpirun %C", &t).is_err());
        assert!(expand_template("mpirun -np %N %C %", &t).is_err());
        let no_hosts = TemplateArgs {
            hostfile: None,
            ..t
        };
        assert!(expand_template("mpirun -np %N -f %H %C", &no_hosts).is_err());
    }

    #[test]
    fn programs_are_checked_before_starting() {
        let path = Some(OsString::from("/usr/bin:/bin"));
        assert!(resolve_program(Path::new("true"), path.as_ref())
            .unwrap()
            .ends_with("true"));
        let e = resolve_program(Path::new("no-such-prog-xyz"), path.as_ref()).unwrap_err();
        assert!(e.to_string().contains("not found in PATH"));
        let e = resolve_program(Path::new("/nonexistent/x"), path.as_ref()).unwrap_err();
        assert!(format!("{e:#}").contains("does not exist"));
        let plain = std::env::temp_dir().join(format!("rgasnetrun-plain-{}", std::process::id()));
        std::fs::write(&plain, "not a program").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = resolve_program(&plain, path.as_ref()).unwrap_err();
        std::fs::remove_file(&plain).unwrap();
        assert!(e.to_string().contains("not executable"), "{e}");
        let e = resolve_program(Path::new("/tmp"), path.as_ref()).unwrap_err();
        assert!(e.to_string().contains("not a regular file"));
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("abc/d-e"), "abc/d-e");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(Spawner::from_spawnfn("S").unwrap(), Spawner::Ssh);
        assert!(Spawner::from_spawnfn("X").is_err());
        assert_eq!(Spawner::from_spawnfn("slurm").unwrap(), Spawner::Slurm);
        assert_eq!(Spawner::from_spawner_var("PMI").unwrap(), Spawner::Slurm);
        assert_eq!(Spawner::from_spawner_var("ssh").unwrap(), Spawner::Ssh);
        assert!(Spawner::from_spawner_var("S").is_err());
    }
}
